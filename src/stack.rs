//! The host call stack of a finding: where in the program the call that broke a rule was made.
//!
//! Captured only when a finding exists (never on the clean path), by the system unwinder
//! (`_Unwind_Backtrace` of libgcc_s, which the Rust runtime already links), from the program's
//! side: the shim's own frames are left out. Each frame is its module (the loaded object's path)
//! and the offset in it, which `sharecheck report` turns into file:line where the module has
//! debug information, plus the function that holds it, from the module's symbol table (`.symtab`,
//! else `.dynsym`), read from its file once per process (a program's own functions are rarely
//! exported; without `-g` the symbol table still names `main`), and from the loader (`dladdr`)
//! only where the file cannot be read. No DWARF is read in the process under test.
//!
//! What a stack costs (2026-11-29, 2x H200, R580): the walk stops at the frames kept (an
//! interpreter's stack is 100 frames and more), objects are found in the loader's list read once
//! per change of what is loaded, and a frame named once is remembered: about 10 us a stack taken
//! again from the same place. Each module's symbol table is read once per process (megabytes for
//! PyTorch's libraries). Naming the frames the first time took about 50 ms of each process of an
//! NCCL job's start-up, what in it still to be split; `dladdr` first, which reads every dynamic
//! symbol of the object for each question, took longer.

use rustc_hash::FxHashMap;
use std::ffi::{c_int, c_void, CStr};
use std::sync::Arc;

/// One frame: `module+offset`, and `symbol+distance` where the loader names one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub module: String,
    pub offset: u64,
    pub symbol: Option<(String, u64)>,
}

impl Frame {
    /// `module+0xoffset (symbol+0xdistance)`.
    pub fn text(&self) -> String {
        match &self.symbol {
            Some((name, distance)) => {
                format!("{}+{:#x} ({name}+{distance:#x})", self.module, self.offset)
            }
            None => format!("{}+{:#x}", self.module, self.offset),
        }
    }
}

type UnwindContext = c_void;
type TraceFn = extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int;

extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(context: *mut UnwindContext) -> usize;
}

/// `_URC_NO_REASON` (go on) and `_URC_END_OF_STACK` (stop).
const GO_ON: c_int = 0;
const STOP: c_int = 5;
/// Frames walked at most (the shim's own included).
const MAX_WALK: usize = 128;
/// Frames walked past the `depth` wanted, for frames no loaded object holds (code generated at
/// run time), which are left out of a stack.
const SPARE: usize = 4;

/// A walk up the stack: the return addresses kept, and where it stops.
struct Walk {
    ips: Vec<usize>,
    /// The addresses of the object whose frames are left out from the innermost end (the shim's
    /// loaded segments), while `leaving` it.
    skip: Option<(usize, usize)>,
    leaving: bool,
    /// Addresses kept at most.
    keep: usize,
    walked: usize,
}

extern "C" fn step(context: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Walk` that `instruction_pointers` passed, alive for the whole walk,
    // and only this callback touches it; `context` is the unwinder's own.
    let walk = unsafe { &mut *(arg as *mut Walk) };
    // SAFETY: as above.
    let ip = unsafe { _Unwind_GetIP(context) };
    walk.walked += 1;
    if ip == 0 || walk.walked > MAX_WALK {
        return STOP;
    }
    if walk.leaving {
        if walk
            .skip
            .is_some_and(|(start, end)| (start..end).contains(&ip.saturating_sub(1)))
        {
            return GO_ON;
        }
        walk.leaving = false;
    }
    walk.ips.push(ip);
    if walk.ips.len() >= walk.keep {
        return STOP;
    }
    GO_ON
}

/// The return addresses of the calling thread's frames, innermost first: at most `keep`, those
/// in `skip` left out from the innermost end. The walk stops there: a deep stack (an
/// interpreter's, 100 frames and more) costs the unwinder only the frames kept.
fn instruction_pointers(keep: usize, skip: Option<(usize, usize)>) -> Vec<usize> {
    walk(keep, skip).ips
}

fn walk(keep: usize, skip: Option<(usize, usize)>) -> Walk {
    let mut walk = Walk {
        ips: Vec::with_capacity(keep.min(MAX_WALK)),
        skip,
        leaving: skip.is_some(),
        keep,
        walked: 0,
    };
    // SAFETY: `step` matches the unwinder's callback type and receives `walk` back as `arg`.
    unsafe { _Unwind_Backtrace(step, &mut walk as *mut Walk as *mut c_void) };
    walk
}

/// The caller's stack, at most `depth` frames, the frames of the object that holds `skip`
/// (the shim: any of its functions' addresses) left out from the innermost end.
pub fn capture(depth: usize, skip: Option<usize>) -> Vec<Frame> {
    if depth == 0 {
        return Vec::new();
    }
    crate::phases::part(crate::phases::Part::Stack, || taken(depth, skip))
}

fn taken(depth: usize, skip: Option<usize>) -> Vec<Frame> {
    let loaded = Loaded::now();
    let skip = skip.and_then(|a| loaded.extent_of(a));
    let mut frames = Vec::with_capacity(depth.min(MAX_WALK));
    let ips = crate::phases::part(crate::phases::Part::Unwind, || {
        instruction_pointers(depth.saturating_add(SPARE), skip)
    });
    for ip in ips {
        // A return address points after the call: step back into the call instruction.
        let at = ip.saturating_sub(1);
        let Some((module, load_bias)) = loaded.of(at) else {
            continue;
        };
        let offset = at.wrapping_sub(load_bias) as u64;
        frames.push(Frame {
            module: module.to_string(),
            offset,
            symbol: named(module, offset, at),
        });
        if frames.len() == depth {
            break;
        }
    }
    frames
}

/// The file of a module the loader lists, so that it can be found again after the process is
/// gone: the main program (which the loader lists with an empty name) by `/proc/self/exe`; a
/// name with no `/` (the vDSO) as it is; another relative name (`dlopen("./libx.so")`) joined
/// to the working directory, without `realpath` (which allocates with `malloc`: a finding's
/// stack may be taken in a signal handler that interrupted `malloc`).
fn module_path(path: &str) -> String {
    if path.is_empty() {
        if let Ok(exe) = std::fs::read_link("/proc/self/exe") {
            return exe.to_string_lossy().into_owned();
        }
    }
    if path.starts_with('/') || !path.contains('/') {
        return path.to_string();
    }
    std::env::current_dir()
        .map(|cwd| joined(&cwd, path))
        .unwrap_or_else(|_| path.to_string())
}

/// `relative` under `dir`, with `.` and `..` taken out by their names alone.
fn joined(dir: &std::path::Path, relative: &str) -> String {
    use std::path::Component;
    let mut out = std::path::PathBuf::from(dir);
    for part in std::path::Path::new(relative).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out.to_string_lossy().into_owned()
}

/// The nearest dynamic symbol at or before `address`, the distance from it, and whether the
/// symbol's size covers the address (else it is only the nearest the loader knows).
fn symbol_at(address: usize) -> Option<(String, u64, bool)> {
    // SAFETY: `Dl_info` is plain C data: all zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut sym: *const libc::Elf64_Sym = std::ptr::null();
    // SAFETY: dladdr1 only inspects loader tables and writes `info` and, for RTLD_DL_SYMENT, a
    // pointer to the symbol's table entry into `sym`: live locals of those types.
    let ok = unsafe {
        libc::dladdr1(
            address as *const c_void,
            &mut info,
            &mut sym as *mut *const libc::Elf64_Sym as *mut *mut c_void,
            RTLD_DL_SYMENT,
        )
    };
    if ok == 0 || info.dli_sname.is_null() || info.dli_saddr.is_null() {
        return None;
    }
    // SAFETY: not NULL: the loader's NUL-terminated symbol name, copied at once.
    let name = unsafe { CStr::from_ptr(info.dli_sname) }
        .to_string_lossy()
        .into_owned();
    let distance = (address - info.dli_saddr as usize) as u64;
    // SAFETY: dladdr1 succeeded with a symbol: `sym` is null or the loader's entry for it, in
    // the object's symbol table (mapped while the object is loaded).
    let covers = !sym.is_null() && distance < unsafe { (*sym).st_size };
    Some((name, distance, covers))
}

/// The loaded objects, as the loader listed them while its counts were `generation`
/// ([`crate::elf::generation`]): while they stay, every address is in the object it was in.
/// Read from `dl_iterate_phdr` (not `dladdr`, about 18,000 instructions a question, which waits
/// for the loader lock) once per change of what is loaded, then asked by binary search.
struct Loaded {
    generation: Option<(u64, u64)>,
    /// Each loaded segment's addresses and its object, by address.
    segments: Vec<(usize, usize, usize)>,
    /// Each object's module (its path as a frame names it), load bias and extent.
    objects: Vec<(Arc<str>, usize, (usize, usize))>,
}

/// The last [`Loaded`] read. Never waited for (`try_lock`): a child forked while another thread
/// held it reads the loader's list again.
static LOADED: parking_lot::Mutex<Option<Arc<Loaded>>> = parking_lot::Mutex::new(None);

impl Loaded {
    /// The objects loaded now: the last list read while the loader's counts have not moved.
    fn now() -> Arc<Loaded> {
        let generation = crate::elf::generation();
        let known = generation.and_then(|g| {
            LOADED
                .try_lock()
                .and_then(|last| last.as_ref().filter(|l| l.generation == Some(g)).cloned())
        });
        if let Some(loaded) = known {
            return loaded;
        }
        let loaded = Arc::new(crate::phases::part(
            crate::phases::Part::ObjectsRead,
            || Loaded::read(generation),
        ));
        if generation.is_some() {
            if let Some(mut last) = LOADED.try_lock() {
                *last = Some(loaded.clone());
            }
        }
        loaded
    }

    fn read(generation: Option<(u64, u64)>) -> Loaded {
        let mut segments = Vec::new();
        let mut objects = Vec::new();
        for object in crate::elf::objects() {
            let Some(extent) = object.extent() else {
                continue;
            };
            // The loader names the main program with an empty path.
            let module: Arc<str> = module_path(&object.path).into();
            segments.extend(object.segments().map(|(a, b)| (a, b, objects.len())));
            objects.push((module, object.bias, extent));
        }
        segments.sort_unstable();
        Loaded {
            generation,
            segments,
            objects,
        }
    }

    /// The index in `objects` of the object holding `address`.
    fn index_of(&self, address: usize) -> Option<usize> {
        let after = self.segments.partition_point(|s| s.0 <= address);
        let &(_, end, object) = self.segments[..after].last()?;
        (address < end).then_some(object)
    }

    /// The module and load bias of the object holding `address`.
    fn of(&self, address: usize) -> Option<(&Arc<str>, usize)> {
        let (module, bias, _) = &self.objects[self.index_of(address)?];
        Some((module, *bias))
    }

    /// The extent of the object holding `address`.
    fn extent_of(&self, address: usize) -> Option<(usize, usize)> {
        Some(self.objects[self.index_of(address)?].2)
    }
}

/// The symbol of each frame named so far, by module and offset (a file's code does not move in
/// it): a stack taken again from the same place (every create of a handle a report may name, a
/// finding repeated in a loop) costs the unwind and a lookup a frame, not `dladdr` and the
/// module's symbol table. Bounded: emptied when full. Never waited for (`try_lock`).
type SymbolCache = FxHashMap<(Arc<str>, u64), Option<(String, u64)>>;
static NAMED: parking_lot::Mutex<Option<SymbolCache>> = parking_lot::Mutex::new(None);

/// How many frames [`NAMED`] keeps.
const NAMED_KEPT: usize = 4096;

/// The function of the call instruction at `at` (`module+offset`): remembered, or named now
/// (and remembered) from the module's symbol table ([`symbols::function`]); where the module's
/// file cannot be read, the dynamic symbol the loader knows (`dladdr`: it reads every dynamic
/// symbol of the object for each question, 0.5 ms for a frame in PyTorch's libraries on R580's
/// hosts).
fn named(module: &Arc<str>, offset: u64, at: usize) -> Option<(String, u64)> {
    let key = (module.clone(), offset);
    if let Some(known) = NAMED
        .try_lock()
        .and_then(|cache| cache.as_ref()?.get(&key).cloned())
    {
        return known;
    }
    let found = crate::phases::part(crate::phases::Part::FrameNamed, || {
        symbols::function(module, offset).unwrap_or_else(|| match symbol_at(at) {
            Some((name, distance, true)) => Some((name, distance)),
            near => near.map(|(n, d, _)| (n, d)),
        })
    });
    if let Some(mut cache) = NAMED.try_lock() {
        let cache = cache.get_or_insert_with(Default::default);
        if cache.len() >= NAMED_KEPT {
            cache.clear();
        }
        cache.insert(key, found.clone());
    }
    found
}

/// `<dlfcn.h>`: ask `dladdr1` for the symbol's table entry.
const RTLD_DL_SYMENT: c_int = 1;

/// The functions of a module's symbol table, for the frames the loader cannot name (a program's
/// own functions are rarely exported; without `-g` the symbol table still names them).
mod symbols {
    use rustc_hash::FxHashMap;
    use std::os::unix::fs::{FileExt, MetadataExt};
    use std::sync::Arc;

    /// What tells one file from another at one path: device, inode, size, modification time.
    type Identity = (u64, u64, u64, i64, i64);

    /// One module file's functions (`.symtab`, else `.dynsym`), by address.
    struct Index {
        file: Identity,
        /// Address, size (at most 4 GiB), and where its name is in the table's strings (16 bytes
        /// a function: the sort moves two thirds of what 24 did, libtorch_cpu has 393,112).
        functions: Vec<(u64, u32, u32)>,
        /// Where the table's strings start in the file.
        strings: u64,
        /// The largest size: how far before an address a function holding it may start.
        widest: u64,
    }

    /// The index of each module read so far (`None`: not an ELF file this reader knows), read
    /// once per file and process: a module's symbol table is read whole (a large library's is
    /// megabytes), the names only where a frame needs one. Bounded; never waited for.
    static INDEXES: parking_lot::Mutex<Option<FxHashMap<String, Option<Arc<Index>>>>> =
        parking_lot::Mutex::new(None);

    /// Modules [`INDEXES`] keeps.
    const MODULES_KEPT: usize = 32;
    /// Symbols a module's table may have to be indexed (its functions kept: 16 bytes each).
    const FUNCTIONS_KEPT: usize = 4 << 20;
    /// The longest name read (a C++ name can be long).
    const NAME_LIMIT: usize = 64 << 10;

    /// The function of `module`'s symbol table that holds `offset` (an address in the module's
    /// own address space), and the distance into it: `Some(None)` where no function of the
    /// table holds it, `None` where the file has no table this reader knows (then the loader
    /// is asked). The file is read with `pread`, its headers
    /// and symbol tables only, never mapped: a file truncated meanwhile (a library rebuilt in
    /// place) then reads short instead of raising SIGBUS in the program. A file that changed
    /// since its index was read is read again. The cold path of a stack, never a clean call's.
    pub(super) fn function(module: &str, offset: u64) -> Option<Option<(String, u64)>> {
        let file = std::fs::File::open(module).ok()?;
        let meta = file.metadata().ok()?;
        let identity = (
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
        );
        let known = INDEXES.try_lock().and_then(|cache| {
            cache
                .as_ref()?
                .get(module)
                .filter(|i| i.as_ref().is_none_or(|i| i.file == identity))
                .cloned()
        });
        let index = match known {
            Some(index) => index,
            None => {
                let index = crate::phases::part(crate::phases::Part::TableRead, || {
                    read_index(&file, identity).map(Arc::new)
                });
                if let Some(mut cache) = INDEXES.try_lock() {
                    let cache = cache.get_or_insert_with(Default::default);
                    if cache.len() >= MODULES_KEPT {
                        cache.clear();
                    }
                    cache.insert(module.to_string(), index.clone());
                }
                index
            }
        }?;
        Some(
            index
                .holder(offset)
                .and_then(|(start, name_at)| Some((read_name(&file, name_at)?, offset - start))),
        )
    }

    impl Index {
        /// The start and name of the function that holds `offset`: of those that do, the one
        /// that starts last.
        fn holder(&self, offset: u64) -> Option<(u64, u64)> {
            let after = self.functions.partition_point(|f| f.0 <= offset);
            self.functions[..after]
                .iter()
                .rev()
                .take_while(|f| offset - f.0 < self.widest.max(1))
                .find(|f| offset - f.0 < u64::from(f.1.max(1)))
                .map(|f| (f.0, self.strings.saturating_add(u64::from(f.2))))
        }
    }

    /// Symbols read from the file at a time (96 KiB).
    const SYMBOLS_READ: usize = 4096;

    /// Reads `file`'s function symbols (`.symtab`, else `.dynsym`) into an index. Only the
    /// headers and the one symbol table are read, in pieces into one buffer: the string tables
    /// (PyTorch's `.strtab` is 78 MB) never, the other table not when the first has functions
    /// (parsing the file whole read both: 10 to 12 ms of libtorch_cpu's 30 on the VM).
    fn read_index(file: &std::fs::File, identity: Identity) -> Option<Index> {
        use object::elf::STT_GNU_IFUNC;
        use object::elf::{FileHeader64, Sym64, SHN_UNDEF, SHT_DYNSYM, SHT_SYMTAB, STT_FUNC};
        use object::read::elf::{FileHeader, SectionHeader, Sym};
        use object::{Endianness, SectionIndex};
        let cache = object::ReadCache::new(file);
        let header = FileHeader64::<Endianness>::parse(&cache).ok()?;
        let endian = header.endian().ok()?;
        let sections = header.sections(endian, &cache).ok()?;
        let mut functions = Vec::new();
        let mut strings = 0;
        for kind in [SHT_SYMTAB, SHT_DYNSYM] {
            let Some(table) = sections.iter().find(|s| s.sh_type(endian) == kind) else {
                continue;
            };
            let entry = std::mem::size_of::<Sym64<Endianness>>() as u64;
            let count = table.sh_size(endian) / entry;
            if count > FUNCTIONS_KEPT as u64 {
                return None;
            }
            strings = sections
                .section(SectionIndex(table.sh_link(endian) as usize))
                .ok()?
                .sh_offset(endian);
            let mut buffer = vec![0u8; SYMBOLS_READ * entry as usize];
            let mut at = 0;
            while at < count {
                let n = (count - at).min(SYMBOLS_READ as u64) as usize;
                let bytes = &mut buffer[..n * entry as usize];
                file.read_exact_at(bytes, table.sh_offset(endian).checked_add(at * entry)?)
                    .ok()?;
                let (symbols, _) =
                    object::pod::slice_from_bytes::<Sym64<Endianness>>(bytes, n).ok()?;
                functions.extend(
                    symbols
                        .iter()
                        .filter(|s| {
                            matches!(s.st_type(), STT_FUNC | STT_GNU_IFUNC)
                                && s.st_shndx(endian) != SHN_UNDEF
                                && s.st_name(endian) != 0
                        })
                        .map(|s| {
                            let size = u32::try_from(s.st_size(endian)).unwrap_or(u32::MAX);
                            (s.st_value(endian), size, s.st_name(endian))
                        }),
                );
                at += n as u64;
            }
            if !functions.is_empty() {
                break;
            }
        }
        if functions.is_empty() {
            return None;
        }
        functions.sort_unstable_by_key(|f| f.0);
        let widest = functions.iter().map(|f| u64::from(f.1)).max().unwrap_or(0);
        Some(Index {
            file: identity,
            functions,
            strings,
            widest,
        })
    }

    /// The NUL-terminated name at `at` in the file (at most [`NAME_LIMIT`] bytes), if not empty.
    fn read_name(file: &std::fs::File, at: u64) -> Option<String> {
        let mut name = Vec::new();
        let mut chunk = [0u8; 256];
        while name.len() < NAME_LIMIT {
            let n = file
                .read_at(&mut chunk, at.checked_add(name.len() as u64)?)
                .ok()?;
            if n == 0 {
                return None;
            }
            if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
                name.extend_from_slice(&chunk[..end]);
                return (!name.is_empty()).then(|| String::from_utf8_lossy(&name).into_owned());
            }
            name.extend_from_slice(&chunk[..n]);
        }
        None
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// A library without `.symtab` (libc, stripped) is named from its `.dynsym`, read from
        /// its file once; a module that is no file to read leaves the question to the loader.
        #[test]
        fn a_stripped_library_is_named_from_its_dynamic_symbols() {
            let object = named(libc::getpid as *const () as usize, "getpid", 3);
            let cache = INDEXES.lock();
            assert!(cache
                .as_ref()
                .and_then(|c| c.get(&object.path))
                .is_some_and(|i| i.as_ref().is_some_and(|i| !i.functions.is_empty())));
            drop(cache);
            assert_eq!(function("/nonexistent/libx.so", 0x100), None);
        }

        /// A file replaced at its path (a library rebuilt in place) is read again: the index
        /// kept is the new file's.
        #[test]
        fn a_file_replaced_at_its_path_is_read_again() {
            let dir = std::env::temp_dir().join(format!("sharecheck-index-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("libx.so");
            let module = path.to_str().unwrap().to_string();
            let address = libc::getpid as *const () as usize;
            let libc_object = crate::loader::object_of(address).expect("libc is loaded");
            let offset = (address - libc_object.load_bias) as u64;
            std::fs::copy(&libc_object.path, &path).unwrap();
            let first = function(&module, offset).expect("a copy of libc has a table");
            assert!(first.is_some_and(|(name, _)| name.contains("getpid")));
            // Another library in its place (libm, through the loader's own path of it).
            let libm = std::ffi::CString::new("libm.so.6").unwrap();
            // SAFETY: dlopen of a system library with a NUL-terminated name; kept loaded.
            let handle = unsafe { libc::dlopen(libm.as_ptr(), libc::RTLD_NOW) };
            assert!(!handle.is_null());
            let cos = std::ffi::CString::new("cos").unwrap();
            // SAFETY: the handle dlopen returned and a NUL-terminated name.
            let cos = unsafe { libc::dlsym(handle, cos.as_ptr()) } as usize;
            let libm_path = crate::loader::object_of(cos).unwrap().path;
            std::fs::remove_file(&path).unwrap();
            std::fs::copy(&libm_path, &path).unwrap();
            let meta = std::fs::metadata(&path).unwrap();
            let _ = function(&module, offset);
            let kept = INDEXES
                .lock()
                .as_ref()
                .and_then(|c| c.get(&module).cloned())
                .flatten()
                .expect("the new file's index");
            assert_eq!((kept.file.1, kept.file.2), (meta.ino(), meta.size()));
            let _ = std::fs::remove_dir_all(&dir);
        }

        /// A function the dynamic symbols do not have (this test program's own, not exported) is
        /// named from `.symtab`, read in pieces: the whole table, not only its first piece, is
        /// indexed (the test binary's `.symtab` holds many thousands of functions).
        #[test]
        fn a_program_s_own_function_is_named_from_its_symbol_table() {
            #[inline(never)]
            fn sharecheck_local_marker(x: u64) -> u64 {
                std::hint::black_box(x).wrapping_mul(3)
            }
            assert_eq!(sharecheck_local_marker(2), 6);
            let object = named(
                sharecheck_local_marker as *const () as usize,
                "sharecheck_local_marker",
                1,
            );
            let file = std::fs::File::open(&object.path).expect("the test program's file");
            let index = read_index(&file, (0, 0, 0, 0, 0)).expect("it has a symbol table");
            assert!(
                index.functions.len() > SYMBOLS_READ,
                "{}",
                index.functions.len()
            );
        }

        /// The function holding `past` bytes into the function at `address` (its module's symbol
        /// table read from the file) is the one named `expected`, `past` bytes in; its module.
        fn named(address: usize, expected: &str, past: u64) -> crate::loader::ObjectInfo {
            let object = crate::loader::object_of(address).expect("the module is loaded");
            let offset = (address - object.load_bias) as u64;
            let (name, distance) = function(&object.path, offset + past)
                .expect("the module's file has a symbol table")
                .expect("a function holds the address");
            assert!(
                name.contains(expected) && distance == past,
                "{name}+{distance}"
            );
            object
        }

        /// Of the functions that hold an address, the one that starts last; a size-0 function
        /// holds its own address only; past every function's end, none.
        #[test]
        fn the_holder_is_the_function_that_starts_last_among_those_that_hold_the_address() {
            let index = Index {
                file: (0, 0, 0, 0, 0),
                // A large function with a smaller one inside it, a size-0 label, a gap.
                functions: vec![
                    (0x100, 0x100, 1),
                    (0x140, 0x10, 2),
                    (0x180, 0, 3),
                    (0x300, 8, 4),
                ],
                strings: 0x1000,
                widest: 0x100,
            };
            assert_eq!(index.holder(0x100), Some((0x100, 0x1001)));
            assert_eq!(index.holder(0x145), Some((0x140, 0x1002)));
            assert_eq!(index.holder(0x150), Some((0x100, 0x1001)));
            assert_eq!(index.holder(0x180), Some((0x180, 0x1003)));
            assert_eq!(index.holder(0x181), Some((0x100, 0x1001)));
            assert_eq!(index.holder(0x200), None);
            assert_eq!(index.holder(0x307), Some((0x300, 0x1004)));
            assert_eq!(index.holder(0x308), None);
            assert_eq!(index.holder(0x50), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn from_here(depth: usize) -> Vec<Frame> {
        capture(depth, None)
    }

    /// A module named by a relative path is found under the working directory, `.` and `..`
    /// taken out; the main program by `/proc/self/exe`; an absolute path as it is.
    #[test]
    fn a_relative_module_name_is_joined_to_the_working_directory() {
        let dir = std::path::Path::new("/opt/work");
        assert_eq!(joined(dir, "./lib/libx.so"), "/opt/work/lib/libx.so");
        assert_eq!(joined(dir, "a/../b/./libx.so"), "/opt/work/b/libx.so");
        assert_eq!(joined(dir, "../libx.so"), "/opt/libx.so");
        assert_eq!(module_path("/usr/lib/liby.so"), "/usr/lib/liby.so");
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            module_path("./not-the-test-binary.so"),
            cwd.join("not-the-test-binary.so").to_string_lossy()
        );
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(module_path(""), exe.to_string_lossy());
    }

    #[test]
    fn frames_name_a_module_and_an_offset_in_it_innermost_first() {
        let frames = from_here(8);
        assert!(!frames.is_empty() && frames.len() <= 8, "{frames:?}");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        // The innermost frames are this test's binary (capture, then from_here).
        assert_eq!(frames[0].module, exe.to_string_lossy(), "{frames:?}");
        assert!(frames[0].offset > 0);
        assert!(frames[0].text().starts_with(&frames[0].module));
        assert!(capture(0, None).is_empty());
        assert_eq!(from_here(2).len(), 2);
        // The innermost frame is a function of this module (`capture`, or a helper a debug
        // build keeps apart), which nothing exports: named from the symbol table.
        assert!(
            frames[0]
                .symbol
                .as_ref()
                .is_some_and(|(name, _)| name.contains("sharecheck5stack")),
            "{frames:?}"
        );
    }

    #[inline(never)]
    fn walked_from_depth(n: usize, keep: usize) -> (usize, usize) {
        if n == 0 {
            let w = walk(keep, None);
            return (w.ips.len(), w.walked);
        }
        let r = walked_from_depth(n - 1, keep);
        // Not a tail call: every level keeps its frame.
        std::hint::black_box(r)
    }

    /// The walk stops once it has the frames it keeps: a deep stack (an interpreter's) costs
    /// the unwinder those frames, not the whole stack.
    #[test]
    fn the_walk_stops_at_the_frames_it_keeps() {
        let (kept, walked) = walked_from_depth(200, 12);
        assert_eq!(kept, 12);
        assert!(walked <= 12, "walked {walked} frames to keep 12");
        let (kept, walked) = walked_from_depth(200, MAX_WALK + 50);
        assert_eq!(kept, MAX_WALK);
        assert!(walked <= MAX_WALK + 1, "{walked}");
    }

    #[test]
    fn the_frames_of_the_object_to_skip_are_left_out() {
        // Skipping this binary's frames leaves the frames of the libraries below it (the test
        // harness runs in this binary too, so what is left is libc's thread start).
        let all = from_here(64);
        let skipped = capture(64, Some(from_here as *const () as usize));
        assert!(skipped.len() < all.len(), "{all:?} / {skipped:?}");
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(
            skipped
                .first()
                .is_none_or(|f| f.module != exe.to_string_lossy()),
            "{skipped:?}"
        );
    }

    /// The frames of a call made again from the same place (a finding repeated in a loop, named
    /// from the caches of objects and symbols) are the frames named the first time, and while
    /// the loader's counts stay the object cache keeps its entries; a library loaded since
    /// empties it (no name from before can outlive a change of what is loaded).
    #[test]
    fn frames_named_again_from_the_caches_are_the_frames_named_first() {
        // Three captures from one place: the first names its frames, the others find them.
        let first: Vec<Vec<Frame>> = (0..3).map(|_| from_here(8)).collect();
        for again in &first[1..] {
            assert_eq!(&first[0], again);
        }
        assert!(first[0].iter().any(|f| f.symbol.is_some()), "{first:?}");
        let generation = crate::elf::generation().expect("glibc counts loads");
        assert!(LOADED
            .lock()
            .as_ref()
            .is_some_and(|l| l.generation == Some(generation) && !l.objects.is_empty()));
        // A library loaded (and kept: the test binary may hold it already) moves the count.
        let name = std::ffi::CString::new("libm.so.6").unwrap();
        // SAFETY: dlopen of a system library with a NUL-terminated name.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW) };
        assert!(!handle.is_null());
        let named = from_here(8);
        assert_eq!(named[0].module, first[0][0].module);
        assert_eq!(named[0].symbol, first[0][0].symbol);
        // SAFETY: the handle dlopen returned.
        unsafe { libc::dlclose(handle) };
    }
}
