//! Device, managed, IPC-imported and virtual (VMM) memory.
//!
//! Device and managed memory is a `memfd` mapped `MAP_SHARED`; the mapping address is the device
//! pointer. Copies therefore move real bytes, and an IPC importer in another process maps the same
//! pages by opening `/proc/<exporter>/fd/<memfd>`. VMM handles are memfds too, mapped at fixed
//! addresses inside reserved (PROT_NONE) ranges.

use crate::types::Owner;
use crate::types::{
    Outcome, INVALID_VALUE, MEM_ATTACH_GLOBAL, MEM_HANDLE_TYPE_FABRIC, MEM_HANDLE_TYPE_POSIX_FD,
    NOT_PERMITTED, NOT_SUPPORTED, OUT_OF_MEMORY,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Granularity of VMM allocations, reservations and maps, and the logical endpoint bind alignment.
pub const GRANULARITY: u64 = 2 << 20;

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

fn round_up(value: u64, to: u64) -> Option<u64> {
    value.checked_add(to - 1).map(|v| v / to * to)
}

/// The lowest number the simulated driver's own descriptors take. R580's own descriptors after
/// its start are other kinds of file than its POSIX exports (/dev/nvidia0 and eventfds, where
/// every export is /dev/nvidiactl: `scripts/gpu/results/2026-11-27-2xH200-R580-export-fd-probe.txt`).
/// The simulator's are memfds, the kind of its exports, so they stay above the low numbers a
/// program's closed exports free, which the shim reads by number and kind at exit
/// (`cuMemExportToShareableHandle.fd-never-closed`).
const OWN_FD_FLOOR: libc::c_int = 256;

/// `fd` moved to a number of at least [`OWN_FD_FLOOR`] (kept where it is if that fails).
pub(crate) fn own_fd(fd: OwnedFd) -> OwnedFd {
    // SAFETY: dup of a descriptor we own; the result is checked.
    let moved = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, OWN_FD_FLOOR) };
    if moved < 0 {
        return fd;
    }
    // SAFETY: a fresh descriptor that we own (the low one closes as `fd` drops).
    unsafe { OwnedFd::from_raw_fd(moved) }
}

/// A new anonymous shared-memory file of `len` bytes.
fn new_memfd(len: u64) -> Outcome<OwnedFd> {
    let name: &CStr = c"sharecheck-sim";
    // SAFETY: memfd_create with a valid name; the result is checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(OUT_OF_MEMORY);
    }
    // SAFETY: fd is a fresh descriptor that we own.
    let fd = own_fd(unsafe { OwnedFd::from_raw_fd(fd) });
    let len = libc::off_t::try_from(len).map_err(|_| OUT_OF_MEMORY)?;
    // SAFETY: ftruncate on a descriptor we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len) } != 0 {
        return Err(OUT_OF_MEMORY);
    }
    Ok(fd)
}

/// Maps `len` bytes of `fd` from `offset`, read-write and shared, at `fixed` or anywhere.
fn map_shared(fd: i32, len: u64, offset: u64, fixed: Option<u64>) -> Option<u64> {
    let flags = libc::MAP_SHARED | if fixed.is_some() { libc::MAP_FIXED } else { 0 };
    let addr = fixed.unwrap_or(0) as usize as *mut libc::c_void;
    // SAFETY: maps a file we hold; a fixed address is only ever inside our own reservation.
    let p = unsafe {
        libc::mmap(
            addr,
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            offset as libc::off_t,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as u64)
}

/// Maps inaccessible anonymous memory (a reservation, or a hole left by an unmap).
fn map_none(len: u64, fixed: Option<u64>) -> Option<u64> {
    let flags = libc::MAP_PRIVATE
        | libc::MAP_ANONYMOUS
        | libc::MAP_NORESERVE
        | if fixed.is_some() { libc::MAP_FIXED } else { 0 };
    let addr = fixed.unwrap_or(0) as usize as *mut libc::c_void;
    // SAFETY: anonymous PROT_NONE mapping; a fixed address is only ever inside our reservation.
    let p = unsafe { libc::mmap(addr, len as usize, libc::PROT_NONE, flags, -1, 0) };
    (p != libc::MAP_FAILED).then_some(p as u64)
}

fn unmap(addr: u64, len: u64) {
    // SAFETY: only ever called on mappings this module created and no longer hands out.
    unsafe { libc::munmap(addr as usize as *mut libc::c_void, len as usize) };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemKind {
    /// `cuMemAlloc` / `hipMalloc`.
    Device,
    /// `cuMemAllocManaged` / `hipMallocManaged`, with its default attach flags.
    Managed { flags: u32 },
    /// Memory of another process, mapped by `cuIpcOpenMemHandle` / `hipIpcOpenMemHandle`.
    IpcImport,
    /// Page-locked host memory: `cuMemAllocHost` (flags 0), `cuMemHostAlloc`, `hipHostMalloc`,
    /// with the flags it was allocated with. With unified addressing its device pointer is its
    /// host address, so the one mapping serves as both.
    Host { flags: u32 },
    /// Stream-ordered memory from a device's default memory pool: `cuMemAllocAsync[_ptsz]`,
    /// `hipMallocAsync`. The simulator allocates and frees it at once, not in stream order.
    Pool,
}

/// An IPC export of an allocation: the same handle is handed out on every export call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Export {
    pub id: u64,
    pub nonce: u64,
}

pub struct Allocation {
    pub base: u64,
    pub size: u64,
    map_len: u64,
    pub memfd: Option<OwnedFd>,
    pub device: i32,
    pub owner: Owner,
    pub kind: MemKind,
    /// Unique within the process (CU_POINTER_ATTRIBUTE_BUFFER_ID).
    pub buffer_id: u64,
    pub export: Option<Export>,
    /// Managed memory's stream association: `(flags, stream handle)`.
    pub attachment: (u32, u64),
}

impl Drop for Allocation {
    fn drop(&mut self) {
        unmap(self.base, self.map_len);
    }
}

/// A `cuMemCreate` allocation.
pub struct Physical {
    memfd: OwnedFd,
    pub size: u64,
    /// The device it was created on; -1 for host NUMA memory.
    pub device: i32,
    /// The host NUMA node of host NUMA memory.
    pub numa: Option<i32>,
    pub handle_types: u32,
    /// References the process holds: the create or import, and every retain, less releases
    /// (R580 answers CUDA_ERROR_INVALID_VALUE to a release past them).
    references: u32,
    mappings: u32,
}

struct VmMap {
    size: u64,
    handle: u64,
    offset: u64,
    /// Bit d set: device d may read and write (cuMemSetAccess).
    access: u64,
}

struct Reservation {
    size: u64,
    maps: BTreeMap<u64, VmMap>,
}

/// Where a device address range lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    Allocation(MemKind),
    Virtual,
}

#[derive(Clone, Copy, Debug)]
pub struct Region {
    pub kind: RegionKind,
    pub device: i32,
    /// The allocation (or, for VMM, the mapping) that holds the range.
    pub base: u64,
    pub size: u64,
}

/// The VMM mapping at an address: its range and the allocation behind it.
pub struct VirtualMapping<'a> {
    pub start: u64,
    pub size: u64,
    pub handle: u64,
    pub offset: u64,
    pub physical: &'a Physical,
}

#[derive(Default)]
pub struct Memory {
    allocations: BTreeMap<u64, Allocation>,
    physical: HashMap<u64, Physical>,
    reservations: BTreeMap<u64, Reservation>,
    next_id: u64,
}

impl Memory {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A new memfd-backed allocation of `size` bytes; returns its address.
    pub fn allocate(
        &mut self,
        size: u64,
        device: i32,
        owner: Owner,
        kind: MemKind,
    ) -> Outcome<u64> {
        if size == 0 {
            return Err(INVALID_VALUE);
        }
        let map_len = round_up(size, page_size()).ok_or(OUT_OF_MEMORY)?;
        let memfd = new_memfd(map_len)?;
        let base = map_shared(memfd.as_raw_fd(), map_len, 0, None).ok_or(OUT_OF_MEMORY)?;
        let buffer_id = self.next_id();
        let default_flags = match kind {
            MemKind::Managed { flags } => flags,
            _ => MEM_ATTACH_GLOBAL,
        };
        self.allocations.insert(
            base,
            Allocation {
                base,
                size,
                map_len,
                memfd: Some(memfd),
                device,
                owner,
                kind,
                buffer_id,
                export: None,
                attachment: (default_flags, 0),
            },
        );
        Ok(base)
    }

    /// Maps `size` bytes of another process's memory through `path` (`/proc/<pid>/fd/<n>`).
    pub fn map_import(&mut self, path: &str, size: u64, device: i32, owner: Owner) -> Option<u64> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .ok()?;
        let map_len = round_up(size, page_size())?;
        let base = map_shared(file.as_raw_fd(), map_len, 0, None)?;
        let buffer_id = self.next_id();
        self.allocations.insert(
            base,
            Allocation {
                base,
                size,
                map_len,
                memfd: None,
                device,
                owner,
                kind: MemKind::IpcImport,
                buffer_id,
                export: None,
                attachment: (MEM_ATTACH_GLOBAL, 0),
            },
        );
        Some(base)
    }

    /// The allocation containing `ptr`.
    pub fn find(&self, ptr: u64) -> Option<&Allocation> {
        let (_, a) = self.allocations.range(..=ptr).next_back()?;
        (ptr - a.base < a.size).then_some(a)
    }

    pub fn find_mut(&mut self, ptr: u64) -> Option<&mut Allocation> {
        let (_, a) = self.allocations.range_mut(..=ptr).next_back()?;
        (ptr - a.base < a.size).then_some(a)
    }

    /// Frees the allocation that starts at `base` if `accept` agrees; returns it (unmapped on drop).
    pub fn remove_if(
        &mut self,
        base: u64,
        accept: impl Fn(&Allocation) -> bool,
    ) -> Outcome<Allocation> {
        match self.allocations.get(&base) {
            Some(a) if accept(a) => Ok(self.allocations.remove(&base).expect("present")),
            _ => Err(INVALID_VALUE),
        }
    }

    /// Removes every allocation of `owner` (context destroyed or device reset).
    pub fn remove_owned(&mut self, owner: Owner) -> Vec<Allocation> {
        let bases: Vec<u64> = self
            .allocations
            .values()
            .filter(|a| a.owner == owner)
            .map(|a| a.base)
            .collect();
        bases
            .into_iter()
            .filter_map(|b| self.allocations.remove(&b))
            .collect()
    }

    pub fn allocations_mut(&mut self) -> impl Iterator<Item = &mut Allocation> {
        self.allocations.values_mut()
    }

    /// The device memory holding all of `[ptr, ptr + len)` (at least one byte).
    pub fn region(&self, ptr: u64, len: u64) -> Option<Region> {
        let len = len.max(1);
        let end = ptr.checked_add(len)?;
        if let Some(a) = self.find(ptr) {
            return (end <= a.base + a.size).then_some(Region {
                kind: RegionKind::Allocation(a.kind),
                device: a.device,
                base: a.base,
                size: a.size,
            });
        }
        // VMM: every byte must be mapped and accessible, possibly through adjacent maps.
        let (res_base, reservation) = self.reservations.range(..=ptr).next_back()?;
        if end > res_base + reservation.size {
            return None;
        }
        let (&first_start, first) = reservation.maps.range(..=ptr).next_back()?;
        let device = self.physical.get(&first.handle)?.device;
        let mut covered = first_start;
        for (&start, map) in reservation.maps.range(first_start..) {
            if start != covered || map.access == 0 {
                return None;
            }
            covered = start + map.size;
            if covered >= end {
                return Some(Region {
                    kind: RegionKind::Virtual,
                    device,
                    base: first_start,
                    size: first.size,
                });
            }
        }
        None
    }

    /// Copies `n` bytes between device ranges (they may overlap).
    pub fn copy_device(&self, dst: u64, src: u64, n: u64) -> Outcome {
        if n == 0 {
            return Ok(());
        }
        self.region(dst, n).ok_or(INVALID_VALUE)?;
        self.region(src, n).ok_or(INVALID_VALUE)?;
        // SAFETY: both ranges lie inside live read-write mappings of this process.
        unsafe {
            std::ptr::copy(
                src as usize as *const u8,
                dst as usize as *mut u8,
                n as usize,
            );
        };
        Ok(())
    }

    /// Copies `n` bytes from the host address `src` into device memory.
    ///
    /// # Safety
    /// `src` is NULL or readable for `n` bytes (the caller's contract with the driver).
    pub unsafe fn copy_to_device(&self, dst: u64, src: *const u8, n: u64) -> Outcome {
        if n == 0 {
            return Ok(());
        }
        if src.is_null() {
            return Err(INVALID_VALUE);
        }
        self.region(dst, n).ok_or(INVALID_VALUE)?;
        // SAFETY: dst is a live mapping; src is the caller's buffer of n bytes (its contract).
        unsafe { std::ptr::copy(src, dst as usize as *mut u8, n as usize) };
        Ok(())
    }

    /// Copies `n` bytes of device memory to the host address `dst`.
    ///
    /// # Safety
    /// `dst` is NULL or writable for `n` bytes (the caller's contract with the driver).
    pub unsafe fn copy_from_device(&self, dst: *mut u8, src: u64, n: u64) -> Outcome {
        if n == 0 {
            return Ok(());
        }
        if dst.is_null() {
            return Err(INVALID_VALUE);
        }
        self.region(src, n).ok_or(INVALID_VALUE)?;
        // SAFETY: src is a live mapping; dst is the caller's buffer of n bytes (its contract).
        unsafe { std::ptr::copy(src as usize as *const u8, dst, n as usize) };
        Ok(())
    }

    // ---- Virtual memory management -------------------------------------------------------

    /// `cuMemCreate`: returns the generic allocation handle.
    pub fn create_physical(
        &mut self,
        size: u64,
        device: i32,
        numa: Option<i32>,
        handle_types: u32,
    ) -> Outcome<u64> {
        if size == 0 || size % GRANULARITY != 0 {
            return Err(INVALID_VALUE);
        }
        let memfd = new_memfd(size)?;
        Ok(self.new_physical(memfd, size, device, numa, handle_types))
    }

    /// A new allocation handle for `memfd`'s memory, with the reference its create or import
    /// takes.
    fn new_physical(
        &mut self,
        memfd: OwnedFd,
        size: u64,
        device: i32,
        numa: Option<i32>,
        handle_types: u32,
    ) -> u64 {
        let handle = crate::handles::encode(crate::handles::Kind::Allocation, self.next_id());
        let physical = Physical {
            memfd,
            size,
            device,
            numa,
            handle_types,
            references: 1,
            mappings: 0,
        };
        self.physical.insert(handle, physical);
        handle
    }

    /// The memory a multicast object maps to (`cuMulticastCreate`): an allocation under the
    /// object's own handle, so that `cuMemMap` maps it and `cuMemRelease` gives it back.
    pub fn create_for_handle(&mut self, handle: u64, size: u64, handle_types: u32) -> Outcome {
        let memfd = new_memfd(size)?;
        let physical = Physical {
            memfd,
            size,
            device: -1,
            numa: None,
            handle_types,
            references: 1,
            mappings: 0,
        };
        self.physical.insert(handle, physical);
        Ok(())
    }

    /// A live (not released) `cuMemCreate` allocation.
    pub fn physical(&self, handle: u64) -> Option<&Physical> {
        self.physical.get(&handle).filter(|p| p.references > 0)
    }

    /// `cuMemRelease`: the memory goes when its last reference and its last mapping go.
    pub fn release_physical(&mut self, handle: u64) -> Outcome {
        let p = self
            .physical
            .get_mut(&handle)
            .filter(|p| p.references > 0)
            .ok_or(INVALID_VALUE)?;
        p.references -= 1;
        if p.references == 0 && p.mappings == 0 {
            self.physical.remove(&handle);
        }
        Ok(())
    }

    /// `cuMemRetainAllocationHandle`: the handle mapped at `ptr`, with one more reference
    /// (R580: INVALID_VALUE where nothing is mapped).
    pub fn retain_physical(&mut self, ptr: u64) -> Outcome<u64> {
        let handle = self.virtual_mapping(ptr).ok_or(INVALID_VALUE)?.handle;
        let p = self.physical.get_mut(&handle).ok_or(INVALID_VALUE)?;
        p.references += 1;
        Ok(handle)
    }

    /// `cuMemExportToShareableHandle` to a POSIX fd: a descriptor of the allocation's memory
    /// (R580: INVALID_VALUE for a handle type the create did not request).
    pub fn export_fd(&self, handle: u64, handle_type: u32) -> Outcome<libc::c_int> {
        let p = self.physical(handle).ok_or(INVALID_VALUE)?;
        if p.handle_types & handle_type == 0 {
            return Err(INVALID_VALUE);
        }
        if handle_type != MEM_HANDLE_TYPE_POSIX_FD {
            return Err(NOT_SUPPORTED);
        }
        // SAFETY: dup of a descriptor this allocation owns; the caller owns the copy.
        let fd = unsafe { libc::fcntl(p.memfd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            return Err(OUT_OF_MEMORY);
        }
        Ok(fd)
    }

    /// `cuMemExportToShareableHandle` of a FABRIC handle: 64 bytes naming this process, the
    /// export and the allocation's descriptor here, published in the run's state directory with
    /// this process's IMEX channel ([`crate::config::Config::fabric_channel`]): an importer in a
    /// process of another channel is refused, as the document says.
    pub fn export_fabric(&mut self, handle: u64) -> Outcome<[u8; FABRIC_HANDLE_SIZE]> {
        let p = self.physical(handle).ok_or(INVALID_VALUE)?;
        if p.handle_types & MEM_HANDLE_TYPE_FABRIC == 0 {
            return Err(INVALID_VALUE);
        }
        let (fd, size, device) = (p.memfd.as_raw_fd(), p.size, p.device);
        let id = self.next_id();
        let nonce = crate::state_dir::nonce(id);
        let channel = crate::config::config().fabric_channel;
        if !crate::state_dir::write(
            &fabric_file(std::process::id(), id),
            &format!("{nonce} {channel}\n"),
        ) {
            return Err(OUT_OF_MEMORY);
        }
        let mut b = [0u8; FABRIC_HANDLE_SIZE];
        b[0..8].copy_from_slice(FABRIC_MAGIC);
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        b[12..16].copy_from_slice(&fd.to_le_bytes());
        b[16..24].copy_from_slice(&id.to_le_bytes());
        b[24..32].copy_from_slice(&nonce.to_le_bytes());
        b[32..40].copy_from_slice(&size.to_le_bytes());
        b[40..44].copy_from_slice(&device.to_le_bytes());
        Ok(b)
    }

    /// `cuMemImportFromShareableHandle` of a FABRIC handle ([`Memory::export_fabric`]): a new
    /// handle to the same memory, reached through the exporter's descriptor (the exporter must
    /// still run). NOT_PERMITTED where this process has no IMEX channel or not the exporter's.
    pub fn import_fabric(&mut self, b: &[u8; FABRIC_HANDLE_SIZE]) -> Outcome<u64> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        if &b[0..8] != FABRIC_MAGIC {
            return Err(INVALID_VALUE);
        }
        let (pid, fd, id, nonce) = (u32_at(8), u32_at(12) as i32, u64_at(16), u64_at(24));
        let (size, device) = (u64_at(32), u32_at(40) as i32);
        let published = crate::state_dir::read(&fabric_file(pid, id)).and_then(|s| {
            let mut words = s.split_whitespace();
            let matches = words.next() == Some(nonce.to_string().as_str());
            matches
                .then(|| words.next().and_then(|c| c.parse::<u32>().ok()))
                .flatten()
        });
        let config = crate::config::config();
        match published {
            None => return Err(INVALID_VALUE),
            Some(_) if config.no_fabric_channel => return Err(NOT_PERMITTED),
            Some(channel) if channel != config.fabric_channel => return Err(NOT_PERMITTED),
            Some(_) => {}
        }
        let path =
            std::ffi::CString::new(format!("/proc/{pid}/fd/{fd}")).map_err(|_| INVALID_VALUE)?;
        // SAFETY: opens a path from a live C string; the result is checked.
        let opened = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if opened < 0 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: a fresh descriptor this allocation owns from now.
        let memfd = own_fd(unsafe { OwnedFd::from_raw_fd(opened) });
        Ok(self.new_physical(memfd, size, device, None, MEM_HANDLE_TYPE_FABRIC))
    }

    /// `cuMemImportFromShareableHandle` of a POSIX fd (one this or another process exported):
    /// a new handle to the same memory, as R580 gives even for the process's own export. The
    /// memory's device is known where this process created it; else device 0.
    pub fn import_fd(&mut self, fd: libc::c_int) -> Outcome<u64> {
        // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat of a descriptor number into a live local; the result is checked.
        let stat = unsafe { libc::fstat(fd, &mut st) };
        if fd < 0 || stat != 0 || st.st_size <= 0 {
            return Err(INVALID_VALUE);
        }
        let same = |p: &Physical| {
            // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
            let mut own: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: fstat of a descriptor the allocation owns, into a live local.
            let known = unsafe { libc::fstat(p.memfd.as_raw_fd(), &mut own) } == 0;
            known && (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)
        };
        let (device, numa) = self
            .physical
            .values()
            .find(|p| same(p))
            .map_or((0, None), |p| (p.device, p.numa));
        // SAFETY: dup of the program's descriptor; the copy is the new allocation's own.
        let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        if copy < 0 {
            return Err(OUT_OF_MEMORY);
        }
        // SAFETY: a fresh descriptor this allocation owns from now.
        let memfd = own_fd(unsafe { OwnedFd::from_raw_fd(copy) });
        let size = st.st_size as u64;
        Ok(self.new_physical(memfd, size, device, numa, MEM_HANDLE_TYPE_POSIX_FD))
    }

    /// `cuMemAddressReserve`.
    pub fn reserve(&mut self, size: u64, alignment: u64, hint: u64) -> Outcome<u64> {
        let alignment = if alignment == 0 {
            GRANULARITY
        } else {
            alignment
        };
        if size == 0 || size % GRANULARITY != 0 || !alignment.is_power_of_two() {
            return Err(INVALID_VALUE);
        }
        let alignment = alignment.max(GRANULARITY);
        // Over-reserve, then trim to the alignment.
        let span = size.checked_add(alignment).ok_or(OUT_OF_MEMORY)?;
        let raw = map_none(span, None).ok_or(OUT_OF_MEMORY)?;
        let base = round_up(raw, alignment).ok_or(OUT_OF_MEMORY)?;
        if base > raw {
            unmap(raw, base - raw);
        }
        let tail = raw + span - (base + size);
        if tail > 0 {
            unmap(base + size, tail);
        }
        let _ = hint; // a hint only; the simulator never promises an address
        self.reservations.insert(
            base,
            Reservation {
                size,
                maps: BTreeMap::new(),
            },
        );
        Ok(base)
    }

    /// The size of the reservation that starts at `ptr`.
    pub fn reservation_size(&self, ptr: u64) -> Option<u64> {
        self.reservations.get(&ptr).map(|r| r.size)
    }

    /// `cuMemAddressFree`: the whole reservation, with nothing mapped in it.
    pub fn free_reservation(&mut self, ptr: u64, size: u64) -> Outcome {
        match self.reservations.get(&ptr) {
            Some(r) if r.size == size && r.maps.is_empty() => {
                self.reservations.remove(&ptr);
                unmap(ptr, size);
                Ok(())
            }
            _ => Err(INVALID_VALUE),
        }
    }

    /// `cuMemMap`, answering misuses as R580 does (scripts/gpu/results/*-vmm-probe.txt): an
    /// unknown or released handle, INVALID_VALUE; ptr, size or offset off the granularity, a
    /// nonzero offset ("currently must be zero"), a range past the allocation or an address
    /// outside every reservation, or part of the allocation only, NOT_SUPPORTED; a range that
    /// runs past its reservation or over
    /// a mapping, INVALID_VALUE. (R580 accepted a map one granule past a reservation's end,
    /// presumably into address space its reservation kept beyond the size asked: not modelled.)
    pub fn map(&mut self, ptr: u64, size: u64, offset: u64, handle: u64) -> Outcome {
        let physical = self
            .physical
            .get(&handle)
            .filter(|p| p.references > 0 || p.mappings > 0)
            .ok_or(INVALID_VALUE)?;
        if size == 0 || [ptr, size, offset].iter().any(|v| v % GRANULARITY != 0) || offset != 0 {
            return Err(NOT_SUPPORTED);
        }
        let end = ptr.checked_add(size).ok_or(INVALID_VALUE)?;
        if !matches!(offset.checked_add(size), Some(e) if e <= physical.size) {
            return Err(NOT_SUPPORTED);
        }
        let (fd, whole) = (physical.memfd.as_raw_fd(), size == physical.size);
        let (&res_base, reservation) = self
            .reservations
            .range_mut(..=ptr)
            .next_back()
            .filter(|(&base, r)| ptr < base + r.size)
            .ok_or(NOT_SUPPORTED)?;
        if end > res_base + reservation.size {
            return Err(INVALID_VALUE);
        }
        let overlaps = reservation
            .maps
            .range(..end)
            .next_back()
            .is_some_and(|(s, m)| s + m.size > ptr);
        if overlaps {
            return Err(INVALID_VALUE);
        }
        // R580 maps an allocation whole or not at all: NOT_SUPPORTED for part of one (an
        // overlap is answered first here; their order on R580 is not measured).
        if !whole {
            return Err(NOT_SUPPORTED);
        }
        map_shared(fd, size, offset, Some(ptr)).ok_or(OUT_OF_MEMORY)?;
        reservation.maps.insert(
            ptr,
            VmMap {
                size,
                handle,
                offset,
                access: 0,
            },
        );
        self.physical
            .get_mut(&handle)
            .expect("checked above")
            .mappings += 1;
        Ok(())
    }

    /// The reservation holding `[ptr, ptr+size)` and the starts of the mappings that cover it
    /// without a gap, starting at `ptr`, or INVALID_VALUE (R580 refuses access set on a range
    /// that starts inside a mapping or runs into unmapped space; a prefix of a mapping is
    /// accepted here, not measured).
    fn covering_mappings(&mut self, ptr: u64, size: u64) -> Outcome<(&mut Reservation, Vec<u64>)> {
        let end = ptr.checked_add(size).ok_or(INVALID_VALUE)?;
        let (_, reservation) = self
            .reservations
            .range_mut(..=ptr)
            .next_back()
            .ok_or(INVALID_VALUE)?;
        let starts: Vec<u64> = reservation.maps.range(ptr..end).map(|(s, _)| *s).collect();
        let mut covered = ptr;
        for s in &starts {
            if *s != covered {
                return Err(INVALID_VALUE);
            }
            covered += reservation.maps[s].size;
        }
        if starts.is_empty() || covered < end {
            return Err(INVALID_VALUE);
        }
        Ok((reservation, starts))
    }

    /// `cuMemUnmap`, as R580 answers: INVALID_VALUE where a mapping is only partly inside
    /// `[ptr, ptr+size)`; otherwise the mappings inside it are unmapped, and a range (or part of
    /// one) with nothing mapped is accepted and left alone. Outside every reservation (not
    /// measured): INVALID_VALUE.
    pub fn unmap(&mut self, ptr: u64, size: u64) -> Outcome {
        let end = ptr.checked_add(size).ok_or(INVALID_VALUE)?;
        let (&base, reservation) = self
            .reservations
            .range_mut(..=ptr)
            .next_back()
            .filter(|(&base, r)| size > 0 && end <= base + r.size)
            .ok_or(INVALID_VALUE)?;
        let _ = base;
        let before = reservation
            .maps
            .range(..ptr)
            .next_back()
            .is_some_and(|(s, m)| s + m.size > ptr);
        let starts: Vec<u64> = reservation.maps.range(ptr..end).map(|(s, _)| *s).collect();
        let past = starts
            .last()
            .is_some_and(|s| s + reservation.maps[s].size > end);
        if before || past {
            return Err(INVALID_VALUE);
        }
        let mut handles = Vec::with_capacity(starts.len());
        for s in starts {
            let m = reservation.maps.remove(&s).expect("listed above");
            map_none(m.size, Some(s)).ok_or(INVALID_VALUE)?;
            handles.push(m.handle);
        }
        for handle in handles {
            let physical = self
                .physical
                .get_mut(&handle)
                .expect("mapped handles stay alive");
            physical.mappings -= 1;
            if physical.references == 0 && physical.mappings == 0 {
                self.physical.remove(&handle);
            }
        }
        Ok(())
    }

    /// `cuMemSetAccess`: `[ptr, ptr+size)` must be fully mapped.
    pub fn set_access(&mut self, ptr: u64, size: u64, grants: &[(i32, bool)]) -> Outcome {
        let (reservation, starts) = self.covering_mappings(ptr, size)?;
        for start in starts {
            let map = reservation.maps.get_mut(&start).expect("found above");
            for &(device, allow) in grants {
                if allow {
                    map.access |= 1 << device;
                } else {
                    map.access &= !(1 << device);
                }
            }
        }
        Ok(())
    }

    /// `(base, size)` of the allocation, or else of the VMM mapping, that contains `ptr`
    /// (`cuMemGetAddressRange`, `hipMemGetAddressRange`).
    pub fn address_range(&self, ptr: u64) -> Option<(u64, u64)> {
        if let Some(a) = self.find(ptr) {
            return Some((a.base, a.size));
        }
        self.virtual_mapping(ptr).map(|m| (m.start, m.size))
    }

    /// The VMM mapping that contains `ptr`.
    pub fn virtual_mapping(&self, ptr: u64) -> Option<VirtualMapping<'_>> {
        let (_, reservation) = self.reservations.range(..=ptr).next_back()?;
        let (&start, map) = reservation.maps.range(..=ptr).next_back()?;
        if ptr >= start + map.size {
            return None;
        }
        Some(VirtualMapping {
            start,
            size: map.size,
            handle: map.handle,
            offset: map.offset,
            physical: self.physical.get(&map.handle)?,
        })
    }
}

/// The bytes of a simulated FABRIC handle (`CUmemFabricHandle`).
pub const FABRIC_HANDLE_SIZE: usize = 64;
const FABRIC_MAGIC: &[u8; 8] = b"SCSIMFB\0";

/// The state file of a FABRIC export: "nonce channel".
fn fabric_file(pid: u32, id: u64) -> String {
    format!("fabric-{pid}-{id}")
}
