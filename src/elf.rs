//! Loaded objects and their exported functions, read without the loader lock.
//!
//! `dlopen`, `dlsym` and `dladdr` wait for the loader lock, which a thread running a library's
//! constructor holds (through `dlopen`) for as long as the constructor runs. A constructor that
//! starts a thread making a covered call and joins it would then deadlock if that thread's first
//! call needed them. `dl_iterate_phdr` takes a different lock (held only while the list of
//! objects changes), and an object already loaded can be read directly: its dynamic section gives
//! its symbol table and hash table, as the loader itself reads them.

use std::ffi::{c_char, c_int, c_void, CStr};

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: i64 = 0;
const DT_HASH: i64 = 4;
const DT_STRTAB: i64 = 5;
const DT_SYMTAB: i64 = 6;
const DT_GNU_HASH: i64 = 0x6fff_fef5;
const DT_VERSYM: i64 = 0x6fff_fff0;
const STT_FUNC: u8 = 2;
const STT_GNU_IFUNC: u8 = 10;
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;
const SHN_UNDEF: u16 = 0;
const VERSYM_HIDDEN: u16 = 0x8000;

#[repr(C)]
struct Sym {
    name: u32,
    info: u8,
    other: u8,
    shndx: u16,
    value: u64,
    size: u64,
}

#[repr(C)]
struct Dyn {
    tag: i64,
    val: u64,
}

/// One loaded object, as `dl_iterate_phdr` describes it. Its program headers stay valid while it
/// is loaded; driver libraries are never unloaded (the loader keeps them, and the shim forwards
/// only to libraries the program itself loaded or it loaded with `RTLD_NODELETE`).
#[derive(Clone, Debug)]
pub struct Object {
    pub path: String,
    /// Load bias (`dlpi_addr`).
    pub bias: usize,
    phdr: usize,
    phnum: usize,
}

/// Every object in the main namespace, in load order (the main program has an empty path).
pub fn objects() -> Vec<Object> {
    unsafe extern "C" fn collect(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: dl_iterate_phdr passes the Vec given below and a valid `dl_phdr_info`. Runs
        // under the loader's list lock: it only copies, never calls into the loader.
        let (out, info) = unsafe { (&mut *(data as *mut Vec<Object>), &*info) };
        let path = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: a NUL-terminated name owned by the loader, valid during the callback.
            unsafe { CStr::from_ptr(info.dlpi_name) }
                .to_string_lossy()
                .into_owned()
        };
        out.push(Object {
            path,
            bias: info.dlpi_addr as usize,
            phdr: info.dlpi_phdr as usize,
            phnum: info.dlpi_phnum as usize,
        });
        0
    }
    let mut out: Vec<Object> = Vec::new();
    // SAFETY: `collect` matches the callback type and only writes `out`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(collect), &mut out as *mut _ as *mut c_void) };
    out
}

/// `struct dl_phdr_info` of `<link.h>` up to the load and unload counts (glibc has them since
/// 2.4; the callback's `size` says whether they are there).
#[repr(C)]
struct PhdrInfoCounts {
    addr: libc::Elf64_Addr,
    name: *const libc::c_char,
    phdr: *const libc::Elf64_Phdr,
    phnum: libc::Elf64_Half,
    adds: libc::c_ulonglong,
    subs: libc::c_ulonglong,
}

/// How many objects the loader has loaded and unloaded so far (`dlpi_adds`, `dlpi_subs`): while
/// both stay, every address is in the object it was in. `None` where the loader does not count.
pub fn generation() -> Option<(u64, u64)> {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        if size >= std::mem::size_of::<PhdrInfoCounts>() {
            // SAFETY: the loader's `dl_phdr_info`, at least as large as `PhdrInfoCounts`, whose
            // layout is its head; `data` is the Option given below.
            let (out, info) = unsafe {
                (
                    &mut *(data as *mut Option<(u64, u64)>),
                    &*(info as *const PhdrInfoCounts),
                )
            };
            *out = Some((info.adds, info.subs));
        }
        // The counts are the same in every object's info: the first is enough.
        1
    }
    let mut out: Option<(u64, u64)> = None;
    // SAFETY: `first` matches the callback type and only writes `out`, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(first), &mut out as *mut _ as *mut c_void) };
    out
}

impl Object {
    fn headers(&self) -> &[libc::Elf64_Phdr] {
        // SAFETY: `phdr` and `phnum` are the loaded object's program headers, mapped for as long
        // as it is loaded.
        unsafe { std::slice::from_raw_parts(self.phdr as *const libc::Elf64_Phdr, self.phnum) }
    }

    /// Whether `address` lies in one of the object's loaded segments.
    pub fn contains(&self, address: usize) -> bool {
        self.headers().iter().any(|h| {
            let start = self.bias.wrapping_add(h.p_vaddr as usize);
            h.p_type == PT_LOAD && (start..start + h.p_memsz as usize).contains(&address)
        })
    }

    /// Each loaded segment's addresses, first to past the last.
    pub fn segments(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.headers()
            .iter()
            .filter(|h| h.p_type == PT_LOAD)
            .map(|h| {
                let start = self.bias.wrapping_add(h.p_vaddr as usize);
                (start, start.wrapping_add(h.p_memsz as usize))
            })
    }

    /// The addresses its loaded segments span, first to past the last.
    pub fn extent(&self) -> Option<(usize, usize)> {
        let start = self.segments().map(|s| s.0).min()?;
        let end = self.segments().map(|s| s.1).max()?;
        Some((start, end))
    }

    /// Where the object is mapped (its first loaded segment), as `dladdr`'s `dli_fbase`.
    pub fn base(&self) -> usize {
        self.headers()
            .iter()
            .filter(|h| h.p_type == PT_LOAD)
            .map(|h| self.bias.wrapping_add((h.p_vaddr & !0xfff) as usize))
            .min()
            .unwrap_or(self.bias)
    }

    /// The address of an exported function of the object, read from its symbol tables (its
    /// default version).
    pub fn function(&self, name: &CStr) -> Lookup {
        match self.read_function(name) {
            Some(Some(address)) => Lookup::Found(address),
            Some(None) => Lookup::AskLoader,
            None => Lookup::Absent,
        }
    }

    /// `Some(Some(address))`, `Some(None)` when only the loader can tell (an indirect function, or
    /// tables this reader does not know), `None` when the object does not define it.
    fn read_function(&self, name: &CStr) -> Option<Option<usize>> {
        let Some(dynamic) = self.headers().iter().find(|h| h.p_type == PT_DYNAMIC) else {
            return Some(None);
        };
        let (mut strtab, mut symtab, mut gnu_hash, mut hash, mut versym) = (0, 0, 0, 0, 0);
        let mut entry = self.bias.wrapping_add(dynamic.p_vaddr as usize) as *const Dyn;
        // The loader relocated these addresses in place (they are past the bias), or left them
        // as offsets (then they are below it).
        let at = |value: u64| {
            let value = value as usize;
            if value < self.bias {
                self.bias + value
            } else {
                value
            }
        };
        for _ in 0..4096 {
            // SAFETY: the dynamic section of a loaded object, an array ending in DT_NULL.
            let d = unsafe { &*entry };
            match d.tag {
                DT_NULL => break,
                DT_STRTAB => strtab = at(d.val),
                DT_SYMTAB => symtab = at(d.val),
                DT_GNU_HASH => gnu_hash = at(d.val),
                DT_HASH => hash = at(d.val),
                DT_VERSYM => versym = at(d.val),
                _ => {}
            }
            // SAFETY: still inside the dynamic section (DT_NULL not reached yet).
            entry = unsafe { entry.add(1) };
        }
        if strtab == 0 || symtab == 0 || (gnu_hash == 0 && hash == 0) {
            return Some(None);
        }
        let tables = Tables {
            strtab: strtab as *const c_char,
            symtab: symtab as *const Sym,
            versym: versym as *const u16,
        };
        let found = if gnu_hash != 0 {
            tables.gnu_lookup(gnu_hash as *const u32, name.to_bytes())
        } else {
            tables.sysv_lookup(hash as *const u32, name.to_bytes())
        }?;
        Some(found.map(|value| self.bias.wrapping_add(value)))
    }
}

/// What an object's tables say of a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(usize),
    /// The object does not define it.
    Absent,
    /// Only the loader can tell (an indirect function, or tables this reader does not know).
    AskLoader,
}

struct Tables {
    strtab: *const c_char,
    symtab: *const Sym,
    versym: *const u16,
}

impl Tables {
    /// The symbol's value if it is the wanted, defined, default-version function.
    fn accept(&self, index: usize, name: &[u8]) -> Option<Option<usize>> {
        // SAFETY: `index` comes from the object's own hash table, so it indexes its symbol table.
        let sym = unsafe { &*self.symtab.add(index) };
        // SAFETY: `st_name` is an offset into the object's string table (NUL-terminated strings).
        let sym_name = unsafe { CStr::from_ptr(self.strtab.add(sym.name as usize)) };
        if sym_name.to_bytes() != name || sym.shndx == SHN_UNDEF {
            return None; // not this one: keep looking
        }
        if !self.versym.is_null() {
            // SAFETY: the version table has one entry per symbol.
            if unsafe { *self.versym.add(index) } & VERSYM_HIDDEN != 0 {
                return None; // a non-default version: keep looking for the default
            }
        }
        let (kind, binding) = (sym.info & 0xf, sym.info >> 4);
        if kind == STT_GNU_IFUNC
            || kind != STT_FUNC
            || !(binding == STB_GLOBAL || binding == STB_WEAK)
        {
            return Some(None); // found, but not a plain function: let the loader answer
        }
        Some(Some(sym.value as usize))
    }

    fn gnu_lookup(&self, table: *const u32, name: &[u8]) -> Option<Option<usize>> {
        let hash = name.iter().fold(5381u32, |h, &c| {
            h.wrapping_mul(33).wrapping_add(u32::from(c))
        });
        // SAFETY: the GNU hash table's header: nbuckets, symoffset, bloom_size, bloom_shift.
        let (nbuckets, symoffset, bloom_size, bloom_shift) =
            unsafe { (*table, *table.add(1), *table.add(2), *table.add(3)) };
        if nbuckets == 0 || bloom_size == 0 {
            return Some(None);
        }
        // SAFETY: the bloom filter (64-bit words on ELF64), the buckets and the chains follow the
        // header, as the GNU hash format lays them out.
        let bloom = unsafe { table.add(4) } as *const u64;
        // SAFETY: as above.
        let buckets = unsafe { bloom.add(bloom_size as usize) } as *const u32;
        // SAFETY: as above.
        let chain = unsafe { buckets.add(nbuckets as usize) };
        // SAFETY: index below bloom_size.
        let word = unsafe { *bloom.add(((hash / 64) % bloom_size) as usize) };
        let mask = (1u64 << (hash % 64)) | (1u64 << ((hash >> bloom_shift) % 64));
        if word & mask != mask {
            return None;
        }
        // SAFETY: index below nbuckets.
        let mut index = unsafe { *buckets.add((hash % nbuckets) as usize) } as usize;
        if index < symoffset as usize {
            return None;
        }
        loop {
            // SAFETY: chain entries exist for every symbol from symoffset on, up to the one with
            // the end bit.
            let h2 = unsafe { *chain.add(index - symoffset as usize) };
            if (hash | 1) == (h2 | 1) {
                if let Some(found) = self.accept(index, name) {
                    return Some(found);
                }
            }
            if h2 & 1 != 0 {
                return None;
            }
            index += 1;
        }
    }

    fn sysv_lookup(&self, table: *const u32, name: &[u8]) -> Option<Option<usize>> {
        let hash = name.iter().fold(0u32, |h, &c| {
            let h = (h << 4).wrapping_add(u32::from(c));
            let g = h & 0xf000_0000;
            (h ^ (g >> 24)) & !g
        });
        // SAFETY: the SysV hash table: nbucket, nchain, then the buckets and the chains.
        let (nbucket, nchain) = unsafe { (*table, *table.add(1)) };
        if nbucket == 0 {
            return Some(None);
        }
        // SAFETY: as above.
        let buckets = unsafe { table.add(2) };
        // SAFETY: as above.
        let chains = unsafe { buckets.add(nbucket as usize) };
        // SAFETY: index below nbucket.
        let mut index = unsafe { *buckets.add((hash % nbucket) as usize) } as usize;
        let mut steps = 0;
        while index != 0 && index < nchain as usize && steps < nchain {
            if let Some(found) = self.accept(index, name) {
                return Some(found);
            }
            // SAFETY: index below nchain.
            index = unsafe { *chains.add(index) } as usize;
            steps += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_functions_are_found_where_the_loader_finds_them() {
        let objects = objects();
        let libc = objects
            .iter()
            .find(|o| o.path.contains("libc.so"))
            .expect("libc is loaded");
        for name in [c"getpid", c"pthread_create", c"dl_iterate_phdr", c"fork"] {
            // SAFETY: looking up a libc function in libc's own handle.
            let expected = unsafe {
                let h = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_NOW);
                libc::dlsym(h, name.as_ptr()) as usize
            };
            assert_eq!(libc.function(name), Lookup::Found(expected), "{name:?}");
            assert!(libc.contains(expected));
        }
        assert_eq!(libc.function(c"no_such_function_anywhere"), Lookup::Absent);
        // An indirect function (chosen at run time by its resolver): the loader answers.
        assert_eq!(libc.function(c"memcpy"), Lookup::AskLoader);
        let own = objects
            .iter()
            .find(|o| o.contains(super::objects as *const () as usize))
            .expect("the object holding this code");
        let Lookup::Found(getpid) = libc.function(c"getpid") else {
            panic!("getpid")
        };
        assert!(!own.contains(getpid));
    }
}
