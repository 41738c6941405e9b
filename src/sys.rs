//! Thin, checked wrappers over the libc calls the library needs: the dynamic
//! loader (dlopen/dlsym/dladdr, pinning our own object), raw writes, the
//! monotonic clock, and the process hooks (pthread_atfork, atexit). Every `unsafe` libc call lives
//! here, except the printf formatter's `snprintf` calls
//! (`hostcall/services/printf/cfmt.rs`); the device-shared memory of hostcall buffers
//! is touched only by `hostcall/protocol/device_words.rs`.

use core::cell::Cell;
use core::ffi::{c_void, CStr};

/// What `write_all` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// Bytes written.
    pub bytes: usize,
    /// The write failed with EPIPE: the pipe's reader is gone.
    pub broken_pipe: bool,
}

/// Writes all of `bytes` to `fd`, retrying on EINTR and short writes; gives up
/// on any other error (diagnostics must never fail the caller).
///
/// A write to a pipe whose reader is gone must not kill the process with
/// SIGPIPE (the application's disposition is left alone): the library's own
/// threads block SIGPIPE for good (`block_sigpipe_in_this_thread`); on any
/// other thread SIGPIPE is blocked around the write, and a SIGPIPE the write
/// raised is taken back before the old mask returns. The caller says so
/// (`log::write_out` logs the first EPIPE once for the process).
pub fn write_all(fd: libc::c_int, bytes: &[u8]) -> Written {
    let mut written = Written { bytes: 0, broken_pipe: false };
    while written.bytes < bytes.len() {
        let rest = &bytes[written.bytes..];
        let n = write_without_sigpipe(fd, rest);
        if n > 0 {
            written.bytes += n as usize;
            continue;
        }
        let error = if n < 0 { std::io::Error::last_os_error().raw_os_error() } else { None };
        if error == Some(libc::EINTR) {
            continue;
        }
        written.broken_pipe = error == Some(libc::EPIPE);
        break;
    }
    written
}

/// `CLOCK_MONOTONIC` in nanoseconds. The listener reads it per visit that
/// finds work: one vDSO call, without `Instant`'s origin subtraction and
/// checked `Duration` arithmetic on top.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is writable storage for one timespec, and
    // CLOCK_MONOTONIC exists on every Linux (it cannot fail with a valid
    // pointer, so the result is not checked).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    (now.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(now.tv_nsec as u64)
}

thread_local! {
    /// True on a thread that blocked SIGPIPE for its whole life.
    static SIGPIPE_BLOCKED: Cell<bool> = const { Cell::new(false) };
}

fn sigpipe_set() -> libc::sigset_t {
    let mut set = core::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: `set` is writable storage for one sigset_t; sigemptyset
    // initializes it and sigaddset adds a valid signal number.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGPIPE);
        set.assume_init()
    }
}

/// Blocks SIGPIPE in the calling thread for the rest of its life (threads
/// the library creates: their writes then fail with EPIPE instead).
#[cfg_attr(not(feature = "rocclr-hostcall"), allow(dead_code))]
pub fn block_sigpipe_in_this_thread() {
    let set = sigpipe_set();
    // SAFETY: `set` is an initialized sigset_t; the old mask is not wanted.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, core::ptr::null_mut()) };
    if rc == 0 {
        let _ = SIGPIPE_BLOCKED.try_with(|b| b.set(true));
    }
}

/// One write(2); a SIGPIPE it raises is never delivered.
fn write_without_sigpipe(fd: libc::c_int, bytes: &[u8]) -> isize {
    let write = || {
        // SAFETY: `bytes` is a live slice; write(2) reads at most `bytes.len()` bytes from it.
        unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) }
    };
    if SIGPIPE_BLOCKED.try_with(|b| b.get()).unwrap_or(false) {
        // Blocked for good here: a SIGPIPE stays pending on this thread,
        // never delivered.
        return write();
    }
    let set = sigpipe_set();
    let mut old = core::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: `set` is initialized; `old` is writable storage for the old mask.
    if unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, old.as_mut_ptr()) } != 0 {
        return write();
    }
    // SAFETY: pthread_sigmask succeeded, so it filled `old`.
    let old = unsafe { old.assume_init() };
    let mut pending = core::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: `pending` is writable storage for one sigset_t.
    let pending_before = unsafe {
        libc::sigpending(pending.as_mut_ptr()) == 0 && libc::sigismember(pending.as_ptr(), libc::SIGPIPE) == 1
    };
    let n = write();
    let error = std::io::Error::last_os_error();
    if n < 0 && error.raw_os_error() == Some(libc::EPIPE) && !pending_before {
        // Take back the SIGPIPE this write raised (pending on this thread
        // while blocked), so it is not delivered when the mask returns.
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `set` is initialized; NULL info is allowed; `zero` is a valid timeout.
        while unsafe { libc::sigtimedwait(&set, core::ptr::null_mut(), &zero) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
    // SAFETY: `old` is the mask pthread_sigmask returned above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut()) };
    if n < 0 {
        // Restore errno for the caller's check (the calls above may change it).
        if let Some(code) = error.raw_os_error() {
            // SAFETY: __errno_location returns this thread's errno slot.
            unsafe { *libc::__errno_location() = code };
        }
    }
    n
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

#[cfg(feature = "rocclr-hostcall")]
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

#[cfg(feature = "rocclr-hostcall")]
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

#[cfg(feature = "rocclr-hostcall")]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe_without_reader() -> libc::c_int {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fds[0] is the read end just created; nothing else uses it.
        unsafe { libc::close(fds[0]) };
        fds[1]
    }

    fn sigpipe_pending() -> bool {
        let mut pending = core::mem::MaybeUninit::<libc::sigset_t>::zeroed();
        // SAFETY: `pending` is writable storage for one sigset_t.
        unsafe {
            libc::sigpending(pending.as_mut_ptr()) == 0
                && libc::sigismember(pending.as_ptr(), libc::SIGPIPE) == 1
        }
    }

    #[test]
    fn a_write_to_a_pipe_without_reader_neither_kills_nor_leaves_a_signal() {
        // Default disposition (the test harness leaves SIGPIPE alone? Rust
        // ignores it at startup; make it the C default for this thread's
        // check to mean something).
        // SAFETY: SIG_DFL is a valid disposition for SIGPIPE.
        let previous = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        let fd = pipe_without_reader();
        std::thread::spawn(move || {
            assert_eq!(
                write_all(fd, b"lost\n"),
                Written { bytes: 0, broken_pipe: true },
                "a caller's thread"
            );
            assert!(!sigpipe_pending(), "the SIGPIPE the write raised was taken back");
            block_sigpipe_in_this_thread();
            assert_eq!(
                write_all(fd, b"lost too\n"),
                Written { bytes: 0, broken_pipe: true },
                "a library thread"
            );
        })
        .join()
        .unwrap();
        // SAFETY: restores the disposition saved above; `fd` is ours.
        unsafe {
            libc::signal(libc::SIGPIPE, previous);
            libc::close(fd);
        }
    }
}
