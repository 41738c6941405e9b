//! Thin, checked wrappers over the libc calls the library needs: the dynamic
//! loader (dlopen/dlsym/dladdr, pinning our own object), raw writes, and the
//! process hooks (pthread_atfork, atexit). Every `unsafe` libc call lives
//! here, except the printf formatter's `snprintf` calls
//! (`hostcall/printf/cfmt.rs`); the device-shared memory of hostcall buffers
//! is touched only by `hostcall/buffer.rs`.

use core::ffi::{c_void, CStr};

/// Writes all of `bytes` to `fd`, retrying on EINTR and short writes; gives up
/// silently on any other error (diagnostics must never fail the caller).
/// Returns the number of bytes written.
pub fn write_all(fd: libc::c_int, bytes: &[u8]) -> usize {
    let mut written = 0;
    while written < bytes.len() {
        let rest = &bytes[written..];
        // SAFETY: `rest` is a live slice; write(2) reads at most `rest.len()` bytes from it.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            written += n as usize;
        } else if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        } else {
            break;
        }
    }
    written
}

/// Looks `name` up among the symbols already loaded in the process.
pub fn dlsym_default(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: RTLD_DEFAULT is a valid pseudo-handle and `name` is NUL-terminated.
    let ptr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!ptr.is_null()).then_some(ptr)
}

/// A library handle from dlopen that is never closed (symbols resolved from it
/// stay valid for the life of the process).
#[derive(Clone, Copy, Debug)]
pub struct Library(*mut c_void);

// SAFETY: a dlopen handle is a process-wide token; dlsym on it is thread-safe.
unsafe impl Send for Library {}
// SAFETY: as above; the handle is never mutated or closed.
unsafe impl Sync for Library {}

impl Library {
    /// dlopen(`name`, RTLD_NOW | RTLD_LOCAL). Returns the dlerror text on failure.
    pub fn open(name: &CStr) -> Result<Library, String> {
        // SAFETY: `name` is NUL-terminated; flags are valid.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(last_dlerror());
        }
        Ok(Library(handle))
    }

    pub fn symbol(&self, name: &CStr) -> Option<*mut c_void> {
        // SAFETY: the handle came from a successful dlopen and is never closed.
        let ptr = unsafe { libc::dlsym(self.0, name.as_ptr()) };
        (!ptr.is_null()).then_some(ptr)
    }
}

fn last_dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call
    // on this thread; we copy it at once.
    let text = unsafe { libc::dlerror() };
    if text.is_null() {
        return String::from("unknown dynamic loader error");
    }
    // SAFETY: non-NULL dlerror text is NUL-terminated (see above).
    unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
}

/// The exported symbol whose address is exactly `addr`, if any (dladdr).
///
/// dladdr never dereferences `addr`; it only searches the loaded objects'
/// symbol tables, so any value is safe to ask about. A pointer into the middle
/// of a function (or to data) does not match: the symbol start must equal `addr`.
pub fn exact_symbol_name(addr: *const c_void) -> Option<&'static CStr> {
    if addr.is_null() {
        return None;
    }
    let mut info = core::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: `info` is writable storage for one Dl_info; dladdr does not dereference `addr`.
    let found = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: dladdr returned non-zero, so it filled `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_sname.is_null() || !core::ptr::eq(info.dli_saddr as *const c_void, addr) {
        return None;
    }
    // SAFETY: dli_sname points into the symbol table of a loaded object, which
    // stays mapped while the object is loaded; HSA runtimes are never unloaded
    // while a caller holds their function pointers.
    Some(unsafe { CStr::from_ptr(info.dli_sname) })
}

#[cfg(all(feature = "rocclr-hostcall", not(loom)))]
/// Registers `child` to run in the child process after fork(2)
/// (pthread_atfork with no prepare/parent handlers).
pub fn register_atfork_child(child: unsafe extern "C" fn()) -> Result<(), String> {
    // SAFETY: `handler` is an `extern "C" fn()` of this library; glibc's
    // pthread_atfork (__register_atfork with this object's DSO handle) drops
    // the handler if the library is ever unloaded, so it never points at
    // unmapped code. NULL prepare/parent handlers are allowed.
    let rc = unsafe { libc::pthread_atfork(None, None, Some(child)) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc).to_string())
    }
}

#[cfg(all(feature = "rocclr-hostcall", not(loom)))]
/// Registers `handler` to run at exit(3), before the `.fini_array` hooks of
/// every object and before the exit handlers registered earlier (glibc runs
/// them last-registered first). Linked from libc_nonshared with this
/// object's DSO handle, so an unload before exit runs (and drops) it too.
pub fn register_at_exit(handler: extern "C" fn()) -> Result<(), String> {
    // SAFETY: `handler` is an `extern "C" fn()` of this library that never
    // unwinds; atexit only records it.
    let rc = unsafe { libc::atexit(handler) };
    if rc == 0 {
        Ok(())
    } else {
        Err("atexit failed (no memory for another handler)".into())
    }
}

#[cfg(all(feature = "rocclr-hostcall", not(loom)))]
/// Makes the loaded object that contains `addr` permanent: dladdr finds its
/// file, dlopen(RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) marks it never to be
/// unloaded (dlclose then leaves it mapped). The extra reference is never
/// closed. Returns the object's path.
pub fn pin_object_containing(addr: *const c_void) -> Result<String, String> {
    let mut info = core::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: `info` is writable storage for one Dl_info; dladdr does not dereference `addr`.
    if unsafe { libc::dladdr(addr, info.as_mut_ptr()) } == 0 {
        return Err("dladdr found no object for our own code".into());
    }
    // SAFETY: dladdr returned non-zero, so it filled `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return Err("dladdr returned no file name".into());
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader, valid
    // while the object is loaded (it is: it holds the code running now).
    let path = unsafe { CStr::from_ptr(info.dli_fname) };
    // SAFETY: `path` is NUL-terminated; the flags are valid. NOLOAD never loads
    // anything new: it only adds a reference to (and NODELETE to) our object.
    let handle =
        unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
    let path = path.to_string_lossy().into_owned();
    if handle.is_null() {
        return Err(format!("dlopen({path}, RTLD_NOLOAD|RTLD_NODELETE): {}", last_dlerror()));
    }
    Ok(path)
}
