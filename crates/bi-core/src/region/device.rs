//! How many bytes a region's file really has: a file's length, or a device's size.
//!
//! A region may live in a regular file (under `/dev/shm`, or on a DAX file system) or on
//! a device: a device-DAX character device (`/dev/dax0.0`, how a CXL memory pool or
//! persistent memory is usually exposed) or a block device. A device's file length reads
//! as 0, so its size comes from elsewhere: the kernel publishes a character device's
//! size in bytes in `/sys/dev/char/MAJOR:MINOR/size`, and a block device's length is
//! where a seek to its end lands. A device cannot be truncated or extended, so a region
//! made on one takes the device's size (rounded down to whole lines), whatever size the
//! configuration asked for.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// What kind of file a region lives in, and how many bytes it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Extent {
    /// A regular file of this length (it may be extended).
    File(u64),
    /// A device of this size (fixed).
    Device(u64),
}

/// The bytes `file` has: a regular file's length, a device's size.
pub(crate) fn extent_of(file: &File) -> std::io::Result<Extent> {
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if kind.is_char_device() {
        return char_device_size(Path::new("/sys/dev/char"), meta.rdev()).map(Extent::Device);
    }
    if kind.is_block_device() {
        let mut f = file;
        let end = f.seek(SeekFrom::End(0))?;
        f.seek(SeekFrom::Start(0))?;
        return Ok(Extent::Device(end));
    }
    Ok(Extent::File(meta.len()))
}

/// A character device's size from `sysfs` (normally `/sys/dev/char`): the `size` file of
/// its `MAJOR:MINOR` entry. A device that publishes no size (a terminal, `/dev/zero`)
/// cannot hold a region: an error that says so.
pub(crate) fn char_device_size(sysfs: &Path, rdev: u64) -> std::io::Result<u64> {
    // The kernel's encoding of a device number (glibc's `major` and `minor`).
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & 0xffff_f000);
    let minor = (rdev & 0xff) | ((rdev >> 12) & 0xffff_ff00);
    let at = sysfs.join(format!("{major}:{minor}")).join("size");
    let text = std::fs::read_to_string(&at).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "a character device that does not publish its size ({}): {e}",
                at.display()
            ),
        )
    })?;
    text.trim().parse::<u64>().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} does not hold a size: {:?}", at.display(), text.trim()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "Miri runs isolated from the file system")]
    fn sizes_come_from_sysfs_by_device_number() {
        let dir = tempfile::tempdir().unwrap();
        // Device 251:3 (encoded as the kernel does) publishes 1 GiB; 251:4 publishes junk.
        for (name, text) in [("251:3", "1073741824\n"), ("251:4", "lots")] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join("size"), text).unwrap();
        }
        let dev = |major: u64, minor: u64| (major << 8) | minor;
        assert_eq!(char_device_size(dir.path(), dev(251, 3)).unwrap(), 1 << 30);
        let junk = char_device_size(dir.path(), dev(251, 4)).unwrap_err();
        assert_eq!(junk.kind(), std::io::ErrorKind::InvalidData);
        let none = char_device_size(dir.path(), dev(251, 5)).unwrap_err();
        assert!(
            none.to_string().contains("does not publish its size"),
            "{none}"
        );
        // Large numbers use the split encoding.
        // Major 4096 (all in the high part), minor 300 (44 low, 256 high).
        let big = (4096u64 << 32) | (256 << 12) | 44;
        std::fs::create_dir(dir.path().join("4096:300")).unwrap();
        std::fs::write(dir.path().join("4096:300").join("size"), "4096").unwrap();
        assert_eq!(char_device_size(dir.path(), big).unwrap(), 4096);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot open devices")]
    fn regular_files_and_devices_without_a_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [0u8; 100]).unwrap();
        let f = File::open(&path).unwrap();
        assert_eq!(extent_of(&f).unwrap(), Extent::File(100));
        if let Ok(null) = File::open("/dev/null") {
            assert!(extent_of(&null).is_err());
        }
    }
}
