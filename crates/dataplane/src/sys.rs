//! Small wrappers over Linux system calls shared by the socket backends:
//! interface names and indexes, interface flags, socket options.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::port::LinkState;

/// Longest interface name Linux accepts (IFNAMSIZ - 1).
pub const IFNAME_MAX: usize = 15;

/// Turns `ret < 0` into the thread's `errno`.
pub fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Adds context to an I/O error without losing its kind.
pub fn context(err: io::Error, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(err.kind(), format!("{what}: {err}"))
}

/// Checks an interface name and returns it as the fixed 16-byte array the
/// kernel wants.
pub fn ifname_bytes(name: &str) -> io::Result<[libc::c_char; libc::IFNAMSIZ]> {
    if name.is_empty()
        || name.len() > IFNAME_MAX
        || name
            .bytes()
            .any(|b| b == 0 || b == b'/' || b.is_ascii_whitespace())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "invalid interface name {name:?} (1 to {IFNAME_MAX} bytes, no '/', NUL or spaces)"
            ),
        ));
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (dst, src) in out.iter_mut().zip(name.bytes()) {
        *dst = src as libc::c_char;
    }
    Ok(out)
}

/// The index of interface `name` in the calling thread's network namespace;
/// a missing interface is a `NotFound` error that names it.
pub fn if_index(name: &str) -> io::Result<u32> {
    ifname_bytes(name)?;
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("interface {name:?} not found: {err}"),
        ));
    }
    Ok(index)
}

/// `struct ifreq` reduced to the name and the flags member of its union,
/// padded to the kernel's 40 bytes.
#[repr(C)]
pub struct IfreqFlags {
    pub name: [libc::c_char; libc::IFNAMSIZ],
    pub flags: libc::c_short,
    pad: [u8; 22],
}

impl IfreqFlags {
    pub fn new(name: &str) -> io::Result<Self> {
        Ok(IfreqFlags {
            name: ifname_bytes(name)?,
            flags: 0,
            pad: [0; 22],
        })
    }
}

/// The interface flags (`IFF_*`) of `name`, asked through socket `fd`
/// (which decides the network namespace).
pub fn if_flags(fd: RawFd, name: &str) -> io::Result<libc::c_int> {
    let mut req = IfreqFlags::new(name)?;
    // SAFETY: SIOCGIFFLAGS reads the name and writes the flags of a
    // `struct ifreq`; `req` has its layout and size.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req as *mut IfreqFlags) })?;
    Ok(libc::c_int::from(req.flags) & 0xffff)
}

/// The MTU of interface `name`, asked through socket `fd` (which decides
/// the network namespace).
pub fn if_mtu(fd: RawFd, name: &str) -> io::Result<usize> {
    /// `struct ifreq` reduced to the name and the `ifr_mtu` member of its
    /// union, padded to the kernel's 40 bytes.
    #[repr(C)]
    struct IfreqMtu {
        name: [libc::c_char; libc::IFNAMSIZ],
        mtu: libc::c_int,
        pad: [u8; 20],
    }
    let mut req = IfreqMtu {
        name: ifname_bytes(name)?,
        mtu: 0,
        pad: [0; 20],
    };
    // SAFETY: SIOCGIFMTU reads the name and writes the MTU of a `struct
    // ifreq`; `req` has its layout and size.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req as *mut IfreqMtu) })
        .map_err(|e| context(e, format!("MTU of {name:?}")))?;
    Ok(usize::try_from(req.mtu).unwrap_or(0))
}

/// Sets or clears `IFF_UP` on interface `name` through socket `fd`.
pub fn set_if_up(fd: RawFd, name: &str, up: bool) -> io::Result<()> {
    let mut req = IfreqFlags::new(name)?;
    // SAFETY: as in `if_flags`.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req as *mut IfreqFlags) })?;
    let up_flag = libc::IFF_UP as libc::c_short;
    req.flags = if up {
        req.flags | up_flag
    } else {
        req.flags & !up_flag
    };
    // SAFETY: SIOCSIFFLAGS reads name and flags from a `struct ifreq`.
    cvt(unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &mut req as *mut IfreqFlags) })?;
    Ok(())
}

/// Link state from interface flags: up means administratively up with
/// carrier (`IFF_UP` and `IFF_RUNNING`).
pub fn link_state_of(fd: RawFd, name: &str) -> LinkState {
    match if_flags(fd, name) {
        Ok(f) if f & libc::IFF_UP != 0 && f & libc::IFF_RUNNING != 0 => LinkState::Up,
        Ok(_) => LinkState::Down,
        Err(_) => LinkState::Unknown,
    }
}

/// Opens a socket and wraps it so it is closed on every path.
pub fn socket(domain: libc::c_int, ty: libc::c_int, protocol: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain system call; no pointers.
    let fd = cvt(unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) })?;
    // SAFETY: `fd` was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a plain value.
pub fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points at a live `T` of the size passed.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// `getsockopt` into a plain value.
pub fn getsockopt<T: Default>(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a live, writable `T` and `len` its size.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut value as *mut T as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(value)
}

/// A `sockaddr_ll` naming interface `ifindex` and ethertype `protocol`
/// (host order; stored in network order).
pub fn sockaddr_ll(ifindex: u32, protocol: u16) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = protocol.to_be();
    addr.sll_ifindex = ifindex as i32;
    addr
}

/// True when the error means "try again later" on a non-blocking descriptor.
pub fn would_block(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR))
        || err.kind() == io::ErrorKind::WouldBlock
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_are_checked() {
        assert!(ifname_bytes("veth0").is_ok());
        assert!(ifname_bytes("").is_err());
        assert!(ifname_bytes("a-name-that-is-too-long").is_err());
        assert!(ifname_bytes("a/b").is_err());
        assert!(ifname_bytes("a b").is_err());
        let b = ifname_bytes("lo").unwrap();
        assert_eq!(
            (b[0], b[1], b[2]),
            (b'l' as libc::c_char, b'o' as libc::c_char, 0)
        );
    }

    #[test]
    fn missing_interface_error_names_it() {
        let err = if_index("nosuchif9").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("nosuchif9"), "{err}");
    }

    #[test]
    fn loopback_has_an_index_and_is_up() {
        // `lo` exists in every network namespace.
        assert!(if_index("lo").unwrap() > 0);
        let s = socket(libc::AF_INET, libc::SOCK_DGRAM, 0).unwrap();
        let flags = if_flags(s.as_raw_fd(), "lo").unwrap();
        assert_ne!(flags & libc::IFF_LOOPBACK, 0);
    }
}
