//! The host call stack of a finding: where in the program the call that broke a rule was made.
//!
//! Captured only when a finding exists (never on the clean path), by the system unwinder
//! (`_Unwind_Backtrace` of libgcc_s, which the Rust runtime already links), from the program's
//! side: the shim's own frames are left out. Each frame is its module (the loaded object's path)
//! and the offset in it, which `sharecheck report` turns into file:line where the module has
//! debug information, plus the function that holds it: the dynamic symbol the loader knows
//! (`dladdr`) where it covers the address, else the module's symbol table, read from its file
//! (a program's own functions are rarely exported; without `-g` the symbol table still names
//! `main`). No DWARF is read in the process under test.

use crate::loader::object_of;
use std::ffi::{c_int, c_void, CStr};

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

struct Walk {
    ips: Vec<usize>,
}

extern "C" fn step(context: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Walk` that `instruction_pointers` passed, alive for the whole walk,
    // and only this callback touches it; `context` is the unwinder's own.
    let walk = unsafe { &mut *(arg as *mut Walk) };
    // SAFETY: as above.
    let ip = unsafe { _Unwind_GetIP(context) };
    if ip == 0 || walk.ips.len() >= MAX_WALK {
        return STOP;
    }
    walk.ips.push(ip);
    GO_ON
}

/// The return addresses of the calling thread's frames, innermost first.
fn instruction_pointers() -> Vec<usize> {
    let mut walk = Walk {
        ips: Vec::with_capacity(32),
    };
    // SAFETY: `step` matches the unwinder's callback type and receives `walk` back as `arg`.
    unsafe { _Unwind_Backtrace(step, &mut walk as *mut Walk as *mut c_void) };
    walk.ips
}

/// The caller's stack, at most `depth` frames, the frames of the object that holds `skip`
/// (the shim: any of its functions' addresses) left out from the innermost end.
pub fn capture(depth: usize, skip: Option<usize>) -> Vec<Frame> {
    if depth == 0 {
        return Vec::new();
    }
    let objects = Objects::now();
    let skip_bias = skip.and_then(|a| objects.of(a)).map(|o| o.1);
    let mut frames = Vec::new();
    let mut leaving = skip_bias.is_some();
    for ip in instruction_pointers() {
        // A return address points after the call: step back into the call instruction.
        let at = ip.saturating_sub(1);
        let Some((module, load_bias)) = objects.of(at) else {
            continue;
        };
        if leaving {
            if Some(load_bias) == skip_bias {
                continue;
            }
            leaving = false;
        }
        let module = module.to_string();
        let offset = (at - load_bias) as u64;
        let symbol = named(&module, offset, || match symbol_at(at) {
            Some((name, distance, true)) => Some((name, distance)),
            near => symtab_symbol(&module, offset).or(near.map(|(n, d, _)| (n, d))),
        });
        frames.push(Frame {
            module,
            offset,
            symbol,
        });
        if frames.len() == depth {
            break;
        }
    }
    frames
}

/// The loader names the main program by how it was started (`./prog`, `prog`): its file then,
/// so that the module can be found again after the process is gone. Another relative name is
/// joined to the working directory, without `realpath` (which allocates with `malloc`: a
/// finding's stack may be taken in a signal handler that interrupted `malloc`).
fn module_path(path: &str) -> String {
    if path.starts_with('/') {
        return path.to_string();
    }
    let exe = std::fs::read_link("/proc/self/exe").ok();
    let named = std::path::Path::new(path).file_name();
    match exe {
        Some(exe) if path.is_empty() || exe.file_name() == named => {
            exe.to_string_lossy().into_owned()
        }
        _ => std::env::current_dir()
            .map(|cwd| joined(&cwd, path))
            .unwrap_or_else(|_| path.to_string()),
    }
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

/// The module (its path as a frame names it) and load bias of each return address seen, while
/// the loader has loaded and unloaded nothing since ([`crate::elf::generation`]): `dladdr` costs
/// about 18,000 instructions a frame (it looks for the nearest symbol too). Bounded, emptied
/// when full or when the loader's counts move; never waited for (`try_lock`).
type ObjectCache = std::collections::HashMap<usize, Option<(std::sync::Arc<str>, usize)>>;
static OBJECTS: parking_lot::Mutex<Option<((u64, u64), ObjectCache)>> =
    parking_lot::Mutex::new(None);

/// How many addresses [`OBJECTS`] keeps.
const OBJECTS_KEPT: usize = 4096;

/// The objects of one capture: the loader's counts when it began.
struct Objects(Option<(u64, u64)>);

impl Objects {
    fn now() -> Objects {
        Objects(crate::elf::generation())
    }

    /// The module and load bias of the object holding `address`.
    fn of(&self, address: usize) -> Option<(std::sync::Arc<str>, usize)> {
        let Some(generation) = self.0 else {
            return Self::find(address);
        };
        if let Some(known) = OBJECTS.try_lock().and_then(|cache| match cache.as_ref() {
            Some((g, map)) if *g == generation => map.get(&address).cloned(),
            _ => None,
        }) {
            return known;
        }
        let found = Self::find(address);
        if let Some(mut cache) = OBJECTS.try_lock() {
            let fresh = !matches!(cache.as_ref(), Some((g, map)) if *g == generation && map.len() < OBJECTS_KEPT);
            if fresh {
                *cache = Some((generation, ObjectCache::default()));
            }
            if let Some((_, map)) = cache.as_mut() {
                map.insert(address, found.clone());
            }
        }
        found
    }

    fn find(address: usize) -> Option<(std::sync::Arc<str>, usize)> {
        let object = object_of(address)?;
        Some((module_path(&object.path).into(), object.load_bias))
    }
}

/// The symbol of each frame named so far, by module and offset (a file's code does not move in
/// it): a finding repeated in a loop (past `duplicate_limit` it is still counted and traced, with
/// its stack) costs the unwind and a lookup, not `dladdr` and a read of the module's symbol table
/// per frame (about 100 us per finding, measured on the simulator). Bounded: emptied when full.
/// Never waited for (`try_lock`): a child forked while another thread held it names its frames
/// without it.
type SymbolCache = std::collections::HashMap<(String, u64), Option<(String, u64)>>;
static NAMED: parking_lot::Mutex<Option<SymbolCache>> = parking_lot::Mutex::new(None);

/// How many frames [`NAMED`] keeps.
const NAMED_KEPT: usize = 4096;

/// The symbol of `module+offset`: remembered, or found by `find` (and remembered).
fn named(
    module: &str,
    offset: u64,
    find: impl FnOnce() -> Option<(String, u64)>,
) -> Option<(String, u64)> {
    let key = (module.to_string(), offset);
    if let Some(known) = NAMED
        .try_lock()
        .and_then(|cache| cache.as_ref()?.get(&key).cloned())
    {
        return known;
    }
    let found = find();
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

/// The function of `module`'s symbol table (`.symtab`, else `.dynsym`) that holds `offset` (an
/// address in the module's own address space), and the distance into it. The file is read with
/// `pread`, its headers and symbol tables only, never mapped: a file truncated meanwhile (a
/// library rebuilt in place) then reads short instead of raising SIGBUS in the program. A
/// finding's cold path, never a call's.
fn symtab_symbol(module: &str, offset: u64) -> Option<(String, u64)> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let file = std::fs::File::open(module).ok()?;
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache).ok()?;
    let holds = |s: &object::Symbol<'_, '_, &object::ReadCache<std::fs::File>>| {
        s.kind() == SymbolKind::Text
            && s.address() <= offset
            && offset - s.address() < s.size().max(1)
    };
    let best = elf
        .symbols()
        .filter(|s| holds(s))
        .max_by_key(ObjectSymbol::address)
        .or_else(|| {
            elf.dynamic_symbols()
                .filter(|s| holds(s))
                .max_by_key(ObjectSymbol::address)
        })?;
    let name = best.name().ok().filter(|n| !n.is_empty())?;
    Some((name.to_string(), offset - best.address()))
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
        // `capture` itself (the innermost frame, or under a helper a debug build keeps apart),
        // which nothing exports: named from the symbol table.
        assert!(
            frames.iter().take(3).any(|f| f
                .symbol
                .as_ref()
                .is_some_and(|(name, _)| name.contains("capture"))),
            "{frames:?}"
        );
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
        assert!(OBJECTS
            .lock()
            .as_ref()
            .is_some_and(|(g, map)| *g == generation && !map.is_empty()));
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
