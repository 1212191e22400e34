//! Writing results: stdout that tolerates a closed pipe; files written as the kind of thing
//! their path names, so that writing a report never destroys what it is written to.
//!
//! A run's files are written as one set ([`files`]): each regular file into a temporary file
//! of its own folder (an unpredictable name, created exclusively, never through a link), and
//! only once every one of them is written are they all renamed over their targets. A run that
//! fails, or is stopped by SIGINT or SIGTERM ([`remove_temporaries_on_signal`]), leaves the
//! files of the run before it as they were. [`check`] refuses, before a run reads anything,
//! an output that is one of its inputs or another of its outputs.

use std::ffi::CString;
use std::fs::FileType;
use std::io::{ErrorKind, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

use polars::prelude::*;

use crate::error::{EngineContext, Error, Result};

/// Writes to stdout; a reader that went away (`onceonly audit | head -1`) is not an error.
pub fn stdout(text: &str) -> Result<()> {
    stdout_bytes(text.as_bytes())
}

fn stdout_bytes(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(err) if err.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|err| Error::io("stdout", err)),
    }
}

/// Writes what `fill` writes to stdout through a buffer, as [`stdout`] writes text.
pub fn stdout_with(fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    match fill(&mut out).and_then(|()| out.flush()) {
        Err(err) if err.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|err| Error::io("stdout", err)),
    }
}

/// Writes `value` as pretty JSON and a newline, as `serde_json::to_string_pretty` and a
/// pushed `\n` would make it, without making the text first.
pub fn pretty_json<T: serde::Serialize + ?Sized>(
    value: &T,
) -> impl FnOnce(&mut dyn Write) -> std::io::Result<()> + '_ {
    move |out| {
        serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::from)?;
        out.write_all(b"\n")
    }
}

/// Writes `bytes` to the file `path` names, as [`files`] writes each of its files.
pub fn file(path: &Path, bytes: &[u8]) -> Result<()> {
    files(&[(path, bytes)])
}

/// Where one output goes, as [`files`] found it.
enum Target {
    Stdout,
    /// A regular file (or none yet) at `path`, the end of any links.
    Replace {
        path: PathBuf,
        permissions: Option<std::fs::Permissions>,
        shown: String,
    },
    InPlace {
        path: PathBuf,
        shown: String,
    },
}

fn target(path: &Path) -> Result<Target> {
    if path == Path::new("-") {
        return Ok(Target::Stdout);
    }
    let shown = path.display().to_string();
    let target = follow_links(path).map_err(|err| Error::io(&shown, err))?;
    match std::fs::metadata(&target) {
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(Target::Replace {
            path: target,
            permissions: None,
            shown,
        }),
        Err(err) => Err(Error::io(&shown, err)),
        Ok(metadata) if metadata.is_file() => Ok(Target::Replace {
            path: target,
            permissions: Some(metadata.permissions()),
            shown,
        }),
        Ok(metadata) if in_place(metadata.file_type()) => Ok(Target::InPlace {
            path: target,
            shown,
        }),
        Ok(metadata) => Err(not_writable(&shown, metadata.file_type())),
    }
}

fn not_writable(shown: &str, file_type: FileType) -> Error {
    Error::io(
        shown,
        std::io::Error::other(format!(
            "is {}, not a file onceonly can write",
            kind(file_type)
        )),
    )
}

/// A set of files written together: each regular file is written to its temporary file when
/// added, devices and pipes are kept until [`Batch::commit`], which writes them and then
/// renames every temporary file over its target. A batch dropped uncommitted (an error on the
/// way) removes its temporary files: no target changes.
#[derive(Default)]
pub struct Batch {
    staged: Vec<Staged>,
    in_place: Vec<(Target, Vec<u8>)>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds `bytes` for `path`; a regular file's bytes are written to its temporary file now.
    pub fn add(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.add_with(path, |out| out.write_all(bytes))
    }

    /// Adds what `fill` writes for `path`. A regular file's temporary file is written now,
    /// through a buffer, so a large output (a report of millions of findings) is never held
    /// whole; a device, pipe or stdout gets it at [`commit`](Self::commit), so it is held
    /// until then.
    pub fn add_with(
        &mut self,
        path: &Path,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<()> {
        match target(path)? {
            Target::Replace {
                path,
                permissions,
                shown,
            } => self
                .staged
                .push(Staged::write(&path, fill, permissions, &shown)?),
            other => {
                let mut bytes = Vec::new();
                fill(&mut bytes).map_err(|err| Error::io(path.display().to_string(), err))?;
                self.in_place.push((other, bytes));
            }
        }
        Ok(())
    }

    /// Writes the devices, pipes and stdout, then renames every temporary file over its
    /// target. A SIGINT or SIGTERM that comes during the renames is acted on after them, so a
    /// run's files change all together.
    pub fn commit(mut self) -> Result<()> {
        for (target, bytes) in std::mem::take(&mut self.in_place) {
            match target {
                Target::Stdout => stdout_bytes(&bytes)?,
                Target::InPlace { path, shown } => write_in_place(&path, &bytes, &shown)?,
                Target::Replace { .. } => unreachable!("regular files are staged"),
            }
        }
        COMMITTING.fetch_add(1, Ordering::SeqCst);
        let mut renamed = Ok(());
        for staged in std::mem::take(&mut self.staged) {
            if renamed.is_ok() {
                renamed = std::fs::rename(&staged.temporary, &staged.target)
                    .map_err(|err| Error::io(&staged.shown, err));
            }
            staged.remove();
        }
        if COMMITTING.fetch_sub(1, Ordering::SeqCst) == 1 {
            let signal = PENDING_SIGNAL.swap(0, Ordering::SeqCst);
            if signal != 0 {
                exit_on_signal(signal);
            }
        }
        renamed
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.staged.iter().for_each(Staged::remove);
    }
}

/// Writes each `(path, bytes)` to the file its path names, as the kind of file it is:
///
/// * `-`: stdout.
/// * a regular file or a path that does not exist yet: a temporary file in its folder renamed
///   over it, so a reader never sees half of it (an existing file keeps its permissions);
/// * a symbolic link: followed to the file it names, which is written as above; the link
///   stays (a link to nothing creates its target);
/// * a character device or a FIFO (`/dev/null`, `/dev/stdout`, a named pipe): written in
///   place, because a rename would replace the device or pipe with a regular file. A reader
///   of the pipe that went away is not an error.
///
/// A directory, block device or socket is refused. Written as one [`Batch`]: an error leaves
/// every target as it was.
pub fn files(outputs: &[(&Path, &[u8])]) -> Result<()> {
    let mut batch = Batch::new();
    for (path, bytes) in outputs {
        batch.add(path, bytes)?;
    }
    batch.commit()
}

/// A temporary file holding a target's new bytes, named where a SIGINT or SIGTERM finds it.
struct Staged {
    temporary: PathBuf,
    target: PathBuf,
    shown: String,
    slot: Option<usize>,
}

impl Staged {
    /// Writes what `fill` writes into a new file `.NAME.RANDOM.tmp` beside `target`: created
    /// exclusively and never through a symbolic link (`O_EXCL | O_NOFOLLOW`), so nothing
    /// planted under a name is written through, and named from 128 random bits, so no name can
    /// be planted.
    fn write(
        target: &Path,
        fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
        permissions: Option<std::fs::Permissions>,
        shown: &str,
    ) -> Result<Staged> {
        // At most 200 bytes of the target's name, so that the temporary name stays within
        // the 255 bytes a file name may have however long the target's is.
        let mut name = target
            .file_name()
            .map(|name| name.to_string_lossy().to_string())
            .unwrap_or_default();
        while name.len() > 200 {
            name.pop();
        }
        let folder = target.parent().unwrap_or(Path::new(""));
        let mut attempts = 0;
        let (mut file, staged) = loop {
            let temporary = folder.join(format!(".{name}.{}.tmp", random_hex()));
            // Named for the signal handler before it is made, so that no signal finds it
            // made and not named; a name that turns out taken is forgotten again.
            let staged = Staged {
                slot: register(&temporary),
                temporary,
                target: target.to_path_buf(),
                shown: shown.to_string(),
            };
            let opened = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&staged.temporary);
            match opened {
                Ok(file) => break (file, staged),
                Err(err) => {
                    unregister(staged.slot);
                    if err.kind() != ErrorKind::AlreadyExists || attempts == 16 {
                        return Err(Error::io(shown, err));
                    }
                    attempts += 1;
                }
            }
        };
        let written = (|| {
            let mut buffered = std::io::BufWriter::with_capacity(1 << 20, &mut file);
            fill(&mut buffered)?;
            buffered.flush()?;
            drop(buffered);
            match permissions {
                Some(permissions) => file.set_permissions(permissions),
                None => Ok(()),
            }
        })();
        match written {
            Ok(()) => Ok(staged),
            Err(err) => {
                staged.remove();
                Err(Error::io(shown, err))
            }
        }
    }

    /// Removes the temporary file (gone already once renamed) and forgets it.
    fn remove(&self) {
        let _ = std::fs::remove_file(&self.temporary);
        unregister(self.slot);
    }
}

/// 32 hex digits from the kernel's random source; should it fail, the time and the process
/// id (the name is still created exclusively).
fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = (now ^ (u128::from(std::process::id()) << 96)).to_le_bytes();
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The temporary files being written, for the signal handler to remove: slots a handler can
/// read without a lock. A name, once stored, is never freed (a handler on another thread may
/// still be reading it); a run writes tens of files, so this is a few kilobytes at most.
const SLOTS: usize = 256;
static TEMPORARIES: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
/// How many batches are renaming; a signal then waits in `PENDING_SIGNAL` until they end.
static COMMITTING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);
static HANDLING: AtomicBool = AtomicBool::new(false);

fn register(path: &Path) -> Option<usize> {
    let name = CString::new(path.as_os_str().as_bytes()).ok()?.into_raw();
    let slot = TEMPORARIES.iter().position(|slot| {
        slot.compare_exchange(
            std::ptr::null_mut(),
            name,
            Ordering::SeqCst,
            Ordering::SeqCst,
        )
        .is_ok()
    });
    if slot.is_none() {
        // Every slot taken: this file is not removed on a signal, and its name not kept.
        drop(unsafe { CString::from_raw(name) });
    }
    slot
}

fn unregister(slot: Option<usize>) {
    if let Some(slot) = slot {
        TEMPORARIES[slot].store(std::ptr::null_mut(), Ordering::SeqCst);
    }
}

/// On SIGINT or SIGTERM, removes the temporary files being written and exits with 128 + the
/// signal (130, 143): the files of the run before are left as they were. Only async-signal-
/// safe calls (`unlink`, `_exit`) are made in the handler.
pub fn remove_temporaries_on_signal() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    if COMMITTING.load(Ordering::SeqCst) > 0 {
        PENDING_SIGNAL.store(signal, Ordering::SeqCst);
        return;
    }
    exit_on_signal(signal);
}

fn exit_on_signal(signal: libc::c_int) {
    // A second signal while the first is being handled waits for it to exit.
    if !HANDLING.swap(true, Ordering::SeqCst) {
        for slot in &TEMPORARIES {
            let name = slot.load(Ordering::SeqCst);
            if !name.is_null() {
                unsafe { libc::unlink(name) };
            }
        }
        unsafe { libc::_exit(128 + signal) };
    }
}

/// Refuses, before a run reads anything, an output (`(flag, path)`) that is one of the run's
/// inputs (`(what, path)`: the config, each source's file, a snapshot's files) or the file of
/// another of its outputs, whether through links or not: the same device and inode, or for a
/// file not made yet, the same canonical folder and name. `-`, devices and pipes are written
/// in place and destroy nothing. Each output's folder must exist, and a path that is a
/// directory, block device or socket is refused here too.
pub fn check(inputs: &[(String, PathBuf)], outputs: &[(String, &Path)]) -> Result<()> {
    let mut read = Vec::new();
    for (what, path) in inputs {
        let shown = path.display().to_string();
        match std::fs::metadata(path) {
            Ok(metadata) => read.push((what, shown, Identity::of(&metadata))),
            Err(_) => {
                if let Some(identity) = Identity::unmade(path) {
                    read.push((what, shown, identity));
                }
            }
        }
    }
    let mut written: Vec<(&String, String, Identity)> = Vec::new();
    for (flag, path) in outputs {
        let identity = match target(path)? {
            Target::Stdout | Target::InPlace { .. } => continue,
            Target::Replace {
                path: target,
                permissions,
                shown,
            } => {
                let folder = match target.parent() {
                    Some(folder) if folder != Path::new("") => folder,
                    _ => Path::new("."),
                };
                if !folder.is_dir() {
                    return Err(Error::io(
                        shown,
                        std::io::Error::other(format!(
                            "its folder {} does not exist",
                            folder.display()
                        )),
                    ));
                }
                match permissions {
                    Some(_) => Identity::of(
                        &std::fs::metadata(&target).map_err(|err| Error::io(&shown, err))?,
                    ),
                    None => Identity::unmade(&target).ok_or_else(|| {
                        Error::io(&shown, std::io::Error::other("has no file name"))
                    })?,
                }
            }
        };
        let shown = path.display().to_string();
        if let Some((what, input, _)) = read.iter().find(|(_, _, read)| *read == identity) {
            return Err(Error::usage(
                flag.as_str(),
                format!(
                    "{shown} is {what} ({input}), which this run reads; an output never \
                     overwrites an input"
                ),
            ));
        }
        if let Some((other, other_shown, _)) =
            written.iter().find(|(_, _, written)| *written == identity)
        {
            return Err(Error::usage(
                flag.as_str(),
                format!(
                    "{shown} is also {other}'s file ({other_shown}); give each output a file \
                     of its own"
                ),
            ));
        }
        written.push((flag, shown, identity));
    }
    Ok(())
}

/// A file as [`check`] tells files apart.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    /// A file that exists: its device and inode.
    Inode(u64, u64),
    /// A file not made yet: its folder, canonical, and its name.
    Unmade(PathBuf),
}

impl Identity {
    fn of(metadata: &std::fs::Metadata) -> Identity {
        Identity::Inode(metadata.dev(), metadata.ino())
    }

    /// `path` (a file that does not exist) by its canonical folder and name; None when the
    /// folder does not exist either.
    fn unmade(path: &Path) -> Option<Identity> {
        let name = path.file_name()?;
        let folder = match path.parent() {
            Some(folder) if folder != Path::new("") => folder,
            _ => Path::new("."),
        };
        let folder = std::fs::canonicalize(folder).ok()?;
        Some(Identity::Unmade(folder.join(name)))
    }
}

/// Where a chain of symbolic links ends: the path itself when it is no link, else the path
/// the last link names (relative targets taken from the link's folder), existing or not.
fn follow_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    // As many links as Linux follows before ELOOP.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(folder) if target.is_relative() => folder.join(target),
                    _ => target,
                };
            }
            Ok(_) => return Ok(current),
            Err(err) if err.kind() == ErrorKind::NotFound => return Ok(current),
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

fn in_place(file_type: FileType) -> bool {
    file_type.is_char_device() || file_type.is_fifo()
}

fn kind(file_type: FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "an unknown kind of file"
    }
}

/// Writes into a device or pipe as it is (opening a FIFO waits for its reader).
fn write_in_place(target: &Path, bytes: &[u8], shown: &str) -> Result<()> {
    let written = std::fs::OpenOptions::new()
        .write(true)
        .open(target)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.flush()));
    match written {
        Err(err) if err.kind() == ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|err| Error::io(shown, err)),
    }
}

/// A cell starting with `= + - @` (or a tab or carriage return) is a formula to a spreadsheet;
/// a leading `'` keeps it text. Every CSV onceonly writes passes its text cells through here.
pub fn defuse(cell: &str) -> String {
    match cell.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => format!("'{cell}"),
        _ => cell.to_string(),
    }
}

/// The version of the verdict files (docs/verdicts.schema.json), in every row's last column.
pub const VERDICTS_FORMAT_VERSION: u32 = 1;

/// Verdicts as CSV (`.csv`) or NDJSON (anything else), one row per try in the order of
/// [`crate::model::TRY`], timestamps in RFC 3339, each row ending with `format_version`: the
/// bytes of the file `path` names.
pub fn verdicts_bytes(path: &Path, verdicts: &DataFrame) -> Result<Vec<u8>> {
    let mut frame = verdicts
        .clone()
        .lazy()
        .sort(crate::model::TRY.to_vec(), Default::default())
        .with_columns([
            col("start_date").dt().strftime("%Y-%m-%dT%H:%M:%S%.6fZ"),
            col("end_date").dt().strftime("%Y-%m-%dT%H:%M:%S%.6fZ"),
            lit(VERDICTS_FORMAT_VERSION).alias("format_version"),
        ])
        .collect()
        .engine("formatting verdicts")?;
    let mut bytes = Vec::new();
    let is_csv = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("csv"));
    if is_csv {
        // Run ids, keys and ids come from Airflow and the provider: a cell a spreadsheet would
        // run as a formula gets a leading quote, as in the CSV report. Numbers stay numbers.
        let columns = frame
            .columns()
            .iter()
            .map(|column| match column.str() {
                Ok(texts) => texts.apply_values(|text| defuse(text).into()).into_column(),
                Err(_) => column.clone(),
            })
            .collect();
        frame = DataFrame::new_infer_height(columns).engine("defusing verdicts")?;
        CsvWriter::new(&mut bytes)
            .finish(&mut frame)
            .engine("writing verdicts")?;
    } else {
        JsonWriter::new(&mut bytes)
            .with_json_format(JsonFormat::JsonLines)
            .finish(&mut frame)
            .engine("writing verdicts")?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_of_links_is_followed_to_its_end_and_a_directory_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("reports")).unwrap();
        std::os::unix::fs::symlink("reports/latest", dir.path().join("report")).unwrap();
        std::os::unix::fs::symlink("night-1.json", dir.path().join("reports/latest")).unwrap();
        file(&dir.path().join("report"), b"{}").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("reports/night-1.json")).unwrap(),
            b"{}"
        );
        assert!(
            std::fs::symlink_metadata(dir.path().join("reports/latest"))
                .unwrap()
                .file_type()
                .is_symlink()
        );

        // A name as long as a file's name may be, with a temporary file of its own.
        let long = dir.path().join("reports").join("n".repeat(255));
        file(&long, b"{}").unwrap();
        assert_eq!(std::fs::read(&long).unwrap(), b"{}");

        let refused = file(&dir.path().join("reports"), b"{}").unwrap_err();
        assert!(refused.to_string().contains("is a directory"), "{refused}");
        std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
        assert!(file(&dir.path().join("loop"), b"{}").is_err());
    }
}
