//! Where the shim's static TLS puts the thread's state (issue 24): the storage of `THREAD`
//! (`src/guard.rs`) starts a cache line on every thread, so that its flag and what every covered
//! call reads and writes are one line wherever the loader places the block. The loader aligns
//! the block to the TLS segment's alignment; the state's offset in the segment is then what
//! decides its line.

mod common;

use object::read::elf::ProgramHeader;
use object::{Object, ObjectSymbol};

#[test]
fn the_threads_state_starts_a_line_in_every_process() {
    let data = std::fs::read(common::shim()).expect("the built shim (scripts/test.sh builds it)");
    let elf = object::File::parse(&*data).expect("an ELF object");
    let tls_align = match &elf {
        object::File::Elf64(e) => e
            .elf_program_headers()
            .iter()
            .find(|ph| ph.p_type(e.endian()) == object::elf::PT_TLS)
            .map(|ph| ph.p_align(e.endian()))
            .expect("a PT_TLS segment"),
        _ => panic!("not a 64-bit ELF object"),
    };
    assert!(
        tls_align >= 64,
        "the TLS segment is aligned to {tls_align} bytes"
    );
    let thread = elf
        .symbols()
        .find(|s| s.name() == Ok("sharecheck_tls_thread"))
        .expect("the thread's state's symbol");
    assert_eq!(
        thread.address() % 64,
        0,
        "the thread's state at offset {:#x} of the TLS segment",
        thread.address()
    );
}
