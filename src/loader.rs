//! Finding the real driver and its functions.
//!
//! Everything here is lazy and lock-free: state lives in atomics, and when two threads race to
//! resolve the same thing both do the (idempotent) loader call and one result wins. No lock is
//! ever held across `dlopen`/`dlsym`.

use crate::{elf, log};
use libc::{c_char, c_int, c_void};
use sharecheck_core::codes;
use sharecheck_core::functions::{Api, FnId, FUNCTIONS};
use sharecheck_core::schema::{env, libraries};
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

const UNRESOLVED: usize = 0;
const MISSING: usize = 1;
/// A driver library the program loaded, read directly (`elf`): no loader lock.
const IMAGE: usize = 2;

static REAL_DLSYM: AtomicUsize = AtomicUsize::new(UNRESOLVED);

/// glibc's own `dlsym`, never the shim's override.
///
/// Looked up with `dlvsym` in libc's own scope: a lookup in the global scope could find the shim's
/// unversioned `dlsym`, which satisfies a versioned request.
pub fn real_dlsym_address() -> usize {
    let cached = REAL_DLSYM.load(Ordering::Acquire);
    if cached != UNRESOLVED {
        return cached;
    }
    let mut found = std::ptr::null_mut();
    // SAFETY: every string is a NUL-terminated literal; `dlopen` with RTLD_NOLOAD only takes a
    // reference to the libc that is already loaded, and that reference is dropped by the one
    // `dlclose` below (only when `dlopen` gave a handle); `dlvsym` only reads the loader's tables,
    // on that handle or on the RTLD_NEXT pseudo-handle. No shim lock is held.
    unsafe {
        let libc_handle = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
        for version in [c"GLIBC_2.34", c"GLIBC_2.2.5", c"GLIBC_2.17"] {
            for handle in [libc_handle, libc::RTLD_NEXT] {
                if handle.is_null() {
                    continue;
                }
                found = libc::dlvsym(handle, c"dlsym".as_ptr(), version.as_ptr());
                if !found.is_null() {
                    break;
                }
            }
            if !found.is_null() {
                break;
            }
        }
        if !libc_handle.is_null() {
            libc::dlclose(libc_handle);
        }
    }
    let address = found as usize;
    if address != 0 {
        REAL_DLSYM.store(address, Ordering::Release);
    }
    address
}

/// Calls glibc's `dlsym`.
pub fn real_dlsym(handle: *mut c_void, name: &CStr) -> *mut c_void {
    let address = real_dlsym_address();
    if address == 0 {
        return std::ptr::null_mut();
    }
    // SAFETY: `address` is non-zero, so it is glibc's `dlsym` (found by versioned lookup in
    // `real_dlsym_address`), whose prototype `DlsymFn` spells; `name` is a live C string. `handle`
    // is passed on as given: a handle of a `dlopen` that the shim holds, or the program's own
    // argument to `dlsym`, whose validity is the program's part of dlsym's contract.
    unsafe {
        let f: DlsymFn = std::mem::transmute(address);
        f(handle, name.as_ptr())
    }
}

/// A driver library: found once per process and kept (`RTLD_NODELETE`, or already loaded by the
/// program, which never unloads a driver it called).
struct DriverLibrary {
    api: Api,
    /// `UNRESOLVED`, `MISSING`, `IMAGE` (the program had loaded it: read through `image`), or the
    /// `dlopen` handle.
    handle: AtomicUsize,
    /// The loaded object when `handle` is `IMAGE` (a leaked `Box`).
    image: AtomicPtr<elf::Object>,
    env_var: &'static str,
    /// Basename prefix of the library as real programs load it.
    file_prefix: &'static str,
    sonames: &'static [&'static CStr],
}

static CUDA: DriverLibrary = DriverLibrary {
    api: Api::Cuda,
    handle: AtomicUsize::new(UNRESOLVED),
    image: AtomicPtr::new(std::ptr::null_mut()),
    env_var: env::CUDA_LIBRARY,
    file_prefix: libraries::CUDA.prefix,
    sonames: libraries::CUDA.sonames,
};

static HIP: DriverLibrary = DriverLibrary {
    api: Api::Hip,
    handle: AtomicUsize::new(UNRESOLVED),
    image: AtomicPtr::new(std::ptr::null_mut()),
    env_var: env::HIP_LIBRARY,
    file_prefix: libraries::HIP.prefix,
    sonames: libraries::HIP.sonames,
};

/// `CUDA_ERROR_NOT_SUPPORTED` / `hipErrorNotSupported`: what a missing function returns.
fn not_supported_name(api: Api) -> &'static str {
    api.result_name(codes::NOT_SUPPORTED)
        .unwrap_or("not supported")
}

fn library(api: Api) -> &'static DriverLibrary {
    match api {
        Api::Cuda => &CUDA,
        Api::Hip => &HIP,
    }
}

const OPEN_FLAGS: c_int = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE;

/// How a driver library is read.
#[derive(Clone, Copy)]
enum Source {
    /// A `dlopen` handle of the shim's.
    Handle(*mut c_void),
    /// A library the program loaded, read directly.
    Image(&'static elf::Object),
}

impl DriverLibrary {
    fn source(&self) -> Option<Source> {
        match self.handle.load(Ordering::Acquire) {
            MISSING => None,
            UNRESOLVED => self.load(),
            IMAGE => self.image(),
            handle => Some(Source::Handle(handle as *mut c_void)),
        }
    }

    fn image(&self) -> Option<Source> {
        let image = self.image.load(Ordering::Acquire);
        // SAFETY: a non-null `image` is a leaked Box, never freed.
        (!image.is_null()).then(|| Source::Image(unsafe { &*image }))
    }

    /// The driver's function `name`. A library the program loaded is read directly, without
    /// the loader lock (a thread a library constructor started and joins may be asking); only
    /// what its tables cannot answer (an indirect function) is asked of the loader.
    fn lookup(&self, name: &CStr) -> Option<usize> {
        let found = match self.source()? {
            Source::Handle(handle) => real_dlsym(handle, name),
            Source::Image(object) => match object.function(name) {
                elf::Lookup::Found(address) => return Some(address),
                elf::Lookup::Absent => return None,
                elf::Lookup::AskLoader => {
                    let path = CString::new(object.path.as_str()).ok()?;
                    let handle = open(&path, libc::RTLD_NOLOAD | OPEN_FLAGS)?;
                    real_dlsym(handle, name)
                }
            },
        };
        (!found.is_null()).then_some(found as usize)
    }

    fn is_missing(&self) -> bool {
        self.source().is_none()
    }

    fn load(&self) -> Option<Source> {
        let mut tried = Vec::new();
        let mut image = None;
        let handle = self
            .open_from_env(&mut tried)
            .or_else(|| {
                image = self.find_already_loaded(&mut tried);
                None
            })
            .or_else(|| {
                image
                    .is_none()
                    .then(|| self.open_by_soname(&mut tried))
                    .flatten()
            });
        let value = match (handle, &image) {
            (Some(h), _) => h as usize,
            (None, Some(_)) => IMAGE,
            (None, None) => MISSING,
        };
        if let Some(object) = image {
            let leaked = Box::into_raw(Box::new(object));
            if self
                .image
                .compare_exchange(
                    std::ptr::null_mut(),
                    leaked,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
            {
                // SAFETY: `leaked` lost the race and was never shared.
                drop(unsafe { Box::from_raw(leaked) });
            }
        }
        match self
            .handle
            .compare_exchange(UNRESOLVED, value, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                if value == MISSING {
                    log::warn_once(
                        self.api.as_str(),
                        format_args!(
                            "no {} driver library could be loaded (tried {}); covered {} calls return {}",
                            self.api.as_str().to_uppercase(),
                            tried.join(", "),
                            self.api.as_str().to_uppercase(),
                            not_supported_name(self.api)
                        ),
                    );
                } else {
                    log::debug(format_args!(
                        "{} driver: {}",
                        self.api.as_str(),
                        tried.last().map_or("", |s| s.as_str())
                    ));
                }
                self.source_of(value)
            }
            // Another thread won the race; its answer stands (our extra refcount is harmless).
            Err(current) => self.source_of(current),
        }
    }

    fn source_of(&self, value: usize) -> Option<Source> {
        match value {
            UNRESOLVED | MISSING => None,
            IMAGE => self.image(),
            handle => Some(Source::Handle(handle as *mut c_void)),
        }
    }

    /// The library the environment names. An empty value (to `dlopen`, the main program) or one
    /// that names the shim itself would make the shim forward to itself forever: such a value is
    /// refused with one line, and the driver is looked up as if it were unset.
    fn open_from_env(&self, tried: &mut Vec<String>) -> Option<*mut c_void> {
        let path = std::env::var_os(self.env_var)?;
        let text = path.to_string_lossy().into_owned();
        if text.is_empty() {
            log::warn_once(
                self.env_var,
                format_args!(
                    "{} is empty; ignored (the driver is looked up as usual)",
                    self.env_var
                ),
            );
            return None;
        }
        tried.push(format!("{}={}", self.env_var, text));
        let c_path = CString::new(text.clone()).ok()?;
        let Some(handle) = open(&c_path, OPEN_FLAGS) else {
            let why = if text.contains('/') && !std::path::Path::new(&text).exists() {
                "no such file"
            } else {
                "the loader refused it"
            };
            log::warn_once(
                self.env_var,
                format_args!(
                    "{}={text} cannot be loaded ({why}); ignored (the driver is looked up as \
                     usual)",
                    self.env_var
                ),
            );
            return None;
        };
        if is_the_shim(handle) {
            log::warn_once(
                self.env_var,
                format_args!(
                    "{}={text} names sharecheck itself, not a driver; ignored (the driver is \
                     looked up as usual)",
                    self.env_var
                ),
            );
            // SAFETY: the handle was just returned by dlopen (the shim is RTLD_NODELETE-pinned by
            // the loader as it is loaded; this drops only the reference taken here).
            unsafe { libc::dlclose(handle) };
            return None;
        }
        Some(handle)
    }

    /// The library the program already loaded: the one it would have called. Found and read
    /// without the loader lock (`elf`).
    fn find_already_loaded(&self, tried: &mut Vec<String>) -> Option<elf::Object> {
        let own = own_object_base();
        elf::objects().into_iter().find(|object| {
            let name = object.path.rsplit('/').next().unwrap_or(&object.path);
            let found =
                object.bias != own && !name.is_empty() && name.starts_with(self.file_prefix);
            if found {
                tried.push(format!("already loaded {}", object.path));
            }
            found
        })
    }

    fn open_by_soname(&self, tried: &mut Vec<String>) -> Option<*mut c_void> {
        for soname in self.sonames {
            tried.push(soname.to_string_lossy().into_owned());
            if let Some(h) = open(soname, OPEN_FLAGS) {
                return Some(h);
            }
        }
        None
    }
}

/// Keeps the library holding `address` loaded for as long as the process lives (once per
/// library). A driver the shim reads directly (see `DriverLibrary::lookup`) is not pinned when it
/// is found, because finding it must not take the loader lock; the `dlsym` path pins it.
pub fn pin_object_of(address: usize) {
    static PINNED: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
    let Some(object) = object_of(address) else {
        return;
    };
    if PINNED
        .iter()
        .any(|p| p.load(Ordering::Relaxed) == object.base)
    {
        return;
    }
    if let Ok(path) = CString::new(object.path) {
        // The handle is dropped on purpose: the reference it holds is the pin.
        if open(&path, libc::RTLD_NOLOAD | OPEN_FLAGS).is_some() {
            if let Some(slot) = PINNED.iter().find(|p| p.load(Ordering::Relaxed) == 0) {
                let _ = slot.compare_exchange(0, object.base, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }
}

/// Whether `handle` resolves the shim's own C API into this copy of the shim: then it is the shim
/// (or the main program, whose global scope finds the preloaded shim first), not a driver.
fn is_the_shim(handle: *mut c_void) -> bool {
    let found = real_dlsym(handle, c"sharecheck_version") as usize;
    found != 0 && object_of(found).is_some_and(|o| o.load_bias == own_object_base())
}

fn open(path: &CStr, flags: c_int) -> Option<*mut c_void> {
    // SAFETY: plain dlopen of a path; no shim lock is held.
    let h = unsafe { libc::dlopen(path.as_ptr(), flags) };
    (!h.is_null()).then_some(h)
}

/// (path, load bias) of every object in the main namespace, in load order (main program: "").
pub fn loaded_objects() -> Vec<(String, usize)> {
    elf::objects()
        .into_iter()
        .map(|o| (o.path, o.bias))
        .collect()
}

/// Load bias of the shim itself (as `dl_iterate_phdr` reports `dlpi_addr`).
pub fn own_object_base() -> usize {
    static OWN: AtomicUsize = AtomicUsize::new(usize::MAX);
    let cached = OWN.load(Ordering::Relaxed);
    if cached != usize::MAX {
        return cached;
    }
    // Without dladdr, which waits for the loader lock (see `elf`).
    let here = own_object_base as *const () as usize;
    let bias = elf::objects()
        .into_iter()
        .find(|o| o.contains(here))
        .map_or(0, |o| o.bias);
    OWN.store(bias, Ordering::Relaxed);
    bias
}

pub struct ObjectInfo {
    pub path: String,
    /// `dli_fbase`: where the object is mapped.
    pub base: usize,
    pub load_bias: usize,
}

/// The loaded object containing `address`.
pub fn object_of(address: usize) -> Option<ObjectInfo> {
    // SAFETY: `Dl_info` is plain C data (pointers and integers): all zeroes is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut map: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: dladdr1 only inspects loader tables (any address may be asked about) and writes a
    // `Dl_info` to `info` and, for RTLD_DL_LINKMAP, a `struct link_map *` to `map`: live locals
    // of those types.
    let ok = unsafe {
        libc::dladdr1(
            address as *const c_void,
            &mut info,
            &mut map as *mut *mut c_void,
            RTLD_DL_LINKMAP,
        )
    };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    let link_map = map as *const LinkMap;
    let load_bias = if link_map.is_null() {
        0
    } else {
        // SAFETY: dladdr1 succeeded and gave the loader's `link_map` of the object containing
        // `address`, whose public head `LinkMap` mirrors (`<link.h>`); it lives while that object
        // stays loaded, and callers ask about objects in use (the shim itself, the caller of
        // `dlsym`, a symbol a lookup just returned, a driver opened RTLD_NODELETE).
        unsafe { (*link_map).l_addr }
    };
    Some(ObjectInfo {
        // SAFETY: not NULL, so the loader's NUL-terminated file name of that object, valid as
        // long as the `link_map` above; copied at once.
        path: unsafe { CStr::from_ptr(info.dli_fname) }
            .to_string_lossy()
            .into_owned(),
        base: info.dli_fbase as usize,
        load_bias,
    })
}

/// `<dlfcn.h>`: ask `dladdr1` for the object's `struct link_map`.
const RTLD_DL_LINKMAP: libc::c_int = 2;

/// The public head of glibc's `struct link_map` (`<link.h>`).
#[repr(C)]
pub struct LinkMap {
    pub l_addr: usize,
    pub l_name: *const c_char,
    pub l_ld: *mut c_void,
    pub l_next: *mut LinkMap,
    pub l_prev: *mut LinkMap,
}

/// Whether `address` lies in a CUDA or HIP driver library (by file name, the configured path, or
/// being the library the shim forwards to).
pub fn is_driver_address(address: usize) -> bool {
    let Some(object) = object_of(address) else {
        return false;
    };
    let name = object.path.rsplit('/').next().unwrap_or(&object.path);
    [&CUDA, &HIP].iter().any(|lib| {
        name.starts_with(lib.file_prefix)
            || std::env::var_os(lib.env_var).is_some_and(|p| p == object.path.as_str())
            || lib.loaded_base() == Some(object.base)
    })
}

impl DriverLibrary {
    fn loaded_base(&self) -> Option<usize> {
        let handle = self.handle.load(Ordering::Acquire);
        if handle == UNRESOLVED || handle == MISSING {
            return None;
        }
        if handle == IMAGE {
            return match self.image() {
                Some(Source::Image(object)) => Some(object.base()),
                _ => None,
            };
        }
        let mut map: *mut LinkMap = std::ptr::null_mut();
        // SAFETY: the handle is a live dlopen handle (RTLD_NODELETE).
        let rc = unsafe {
            libc::dlinfo(
                handle as *mut c_void,
                libc::RTLD_DI_LINKMAP,
                &mut map as *mut *mut LinkMap as *mut c_void,
            )
        };
        if rc != 0 || map.is_null() {
            return None;
        }
        // SAFETY: dlinfo succeeded and wrote the loader's `link_map` of the driver library, whose
        // public head `LinkMap` mirrors (`<link.h>`); the library is RTLD_NODELETE, so it lives
        // as long as the process.
        let name = unsafe { (*map).l_name };
        if name.is_null() {
            return None;
        }
        // The mapping base of the object, as dladdr would report it.
        // SAFETY: as above.
        let ld = unsafe { (*map).l_ld } as usize;
        object_of(ld).map(|o| o.base)
    }
}

// ---------------------------------------------------------------------------------------------
// Function slots.

static SLOTS: [AtomicUsize; FUNCTIONS.len()] =
    [const { AtomicUsize::new(UNRESOLVED) }; FUNCTIONS.len()];

/// The real driver function behind an interposed symbol, resolved on first use.
#[inline]
pub fn real_function(id: FnId) -> Option<usize> {
    let slot = &SLOTS[id as usize];
    match slot.load(Ordering::Acquire) {
        MISSING => None,
        UNRESOLVED => resolve_slot(id),
        address => Some(address),
    }
}

/// The real driver function behind an interposed symbol once it was resolved (`None` before its
/// first use and when it is missing: ask [`real_function`] then).
#[inline(always)]
pub fn resolved(id: FnId) -> Option<usize> {
    let address = SLOTS[id as usize].load(Ordering::Acquire);
    (address > MISSING).then_some(address)
}

/// First use of a function: finds it (shielded here, so that callers keep no landing pad for it).
#[cold]
#[inline(never)]
fn resolve_slot(id: FnId) -> Option<usize> {
    crate::guard::shielded(None, || find_slot(id))
}

fn find_slot(id: FnId) -> Option<usize> {
    let info = id.info();
    let address = CString::new(info.symbol)
        .ok()
        .and_then(|name| library(info.api).lookup(&name));
    let value = address.unwrap_or(MISSING);
    match SLOTS[id as usize].compare_exchange(
        UNRESOLVED,
        value,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => address,
        Err(current) => (current != MISSING).then_some(current),
    }
}

/// Says once, when the program calls it, that a function is missing from the driver.
pub fn warn_missing(id: FnId) {
    let info = id.info();
    if library(info.api).is_missing() {
        return; // the library itself is missing: that was said when loading it
    }
    let needs = if info.since > 0 {
        format!(
            " (it needs a driver for CUDA {}.{})",
            info.since / 1000,
            info.since % 1000 / 10
        )
    } else {
        String::new()
    };
    log::warn_once(
        info.symbol,
        format_args!(
            "{} is not exported by the {} driver library{needs}; calls to it return {}",
            info.symbol,
            info.api.as_str().to_uppercase(),
            not_supported_name(info.api)
        ),
    );
}

/// Records the real function a `dlsym` on the program's own driver handle returned, when the slot
/// is still empty: the shim then forwards to exactly the library the program looked up.
pub fn adopt_real_function(id: FnId, address: usize) {
    let _ = SLOTS[id as usize].compare_exchange(
        UNRESOLVED,
        address,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// A named driver function outside the declaration list (the resolvers), resolved per call site.
pub struct NamedSlot {
    api: Api,
    symbol: &'static CStr,
    address: AtomicUsize,
}

impl NamedSlot {
    pub const fn new(api: Api, symbol: &'static CStr) -> Self {
        NamedSlot {
            api,
            symbol,
            address: AtomicUsize::new(UNRESOLVED),
        }
    }

    pub fn api(&self) -> Api {
        self.api
    }

    pub fn symbol(&self) -> &'static CStr {
        self.symbol
    }

    pub fn get(&self) -> Option<usize> {
        match self.address.load(Ordering::Acquire) {
            MISSING => None,
            UNRESOLVED => {
                let found = library(self.api).lookup(self.symbol);
                let value = found.unwrap_or(MISSING);
                match self.address.compare_exchange(
                    UNRESOLVED,
                    value,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => found,
                    Err(current) => (current != MISSING).then_some(current),
                }
            }
            address => Some(address),
        }
    }
}
