//! Files sent into chats (the outbound side of [`Attachment`](crate::Attachment)): an
//! [`OutboundFile`] is a file already opened and checked by the caller (chela opens it
//! without following symlinks, right before each send, and checks what it opened), so a
//! channel never opens a path itself: it streams the bytes from the handle, by position, so
//! the same handle can be read again for a retry without ever holding the file in memory.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use futures_util::Stream;

use crate::AttachmentKind;

/// Bytes read from the file per chunk of an upload.
const CHUNK_BYTES: u64 = 256 * 1024;

/// A file to send, open and checked: a regular file of `size` bytes (as `fstat` gave it
/// when it was opened), sent as what its name says.
#[derive(Debug, Clone)]
pub struct OutboundFile {
    file: Arc<std::fs::File>,
    size: u64,
    name: String,
    /// How it goes: [`AttachmentKind::Image`] as a picture, [`AttachmentKind::Voice`] as a
    /// voice note, anything else as a document.
    pub kind: AttachmentKind,
}

impl OutboundFile {
    /// `file`, opened and checked by the caller, `size` bytes long, sent under `name` as what
    /// the name says ([`kind_for_name`]).
    pub fn new(file: std::fs::File, size: u64, name: String) -> OutboundFile {
        OutboundFile {
            file: Arc::new(file),
            size,
            kind: kind_for_name(&name),
            name,
        }
    }

    /// The same file, sent as a document (a platform refused it as a picture or voice note).
    pub fn as_document(&self) -> OutboundFile {
        OutboundFile {
            kind: AttachmentKind::Document,
            ..self.clone()
        }
    }

    /// Its size in bytes when it was opened; the upload sends exactly this many.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The name the file is sent under.
    pub fn file_name(&self) -> &str {
        &self.name
    }

    /// The MIME type its name says ([`mime_for_name`]).
    pub fn mime_type(&self) -> &'static str {
        mime_for_name(&self.name)
    }

    /// The file's bytes, [`OutboundFile::size`] of them from the start, in chunks read by
    /// position on the blocking pool; a file that shrank since it was opened ends the stream
    /// with an error (never a short upload). Each call starts again from the first byte.
    pub fn chunks(&self) -> impl Stream<Item = io::Result<Vec<u8>>> + Send + 'static {
        let file = self.file.clone();
        let size = self.size;
        futures_util::stream::try_unfold(0u64, move |offset| {
            let file = file.clone();
            async move {
                if offset >= size {
                    return Ok(None);
                }
                let want = (size - offset).min(CHUNK_BYTES);
                let chunk = tokio::task::spawn_blocking(move || read_at(&file, offset, want))
                    .await
                    .map_err(io::Error::other)??;
                Ok(Some((chunk, offset + want)))
            }
        })
    }
}

/// `len` bytes of `file` from `offset`.
fn read_at(file: &std::fs::File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(io::Error::other)?;
    let mut buf = vec![0; len];
    file.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// What a file named `name` goes as: `.jpg`, `.jpeg`, `.png`, `.webp` as a picture, `.ogg`,
/// `.oga`, `.opus` as a voice note, anything else as a document.
pub fn kind_for_name(name: &str) -> AttachmentKind {
    match extension(name).as_str() {
        "jpg" | "jpeg" | "png" | "webp" => AttachmentKind::Image,
        "ogg" | "oga" | "opus" => AttachmentKind::Voice,
        _ => AttachmentKind::Document,
    }
}

/// The MIME type the extension of `name` names (`application/octet-stream` when unknown).
pub fn mime_for_name(name: &str) -> &'static str {
    match extension(name).as_str() {
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "webp" => "image/webp",
        "gif" => "image/gif",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        "pdf" => "application/pdf",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "json" => "application/json",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

/// The lowercase extension of `name` (empty when none).
fn extension(name: &str) -> String {
    std::path::Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use futures_util::TryStreamExt;

    use super::*;

    fn opened(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> OutboundFile {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        OutboundFile::new(file, bytes.len() as u64, name.to_owned())
    }

    #[test]
    fn outbound_files_go_as_what_their_names_say() {
        assert_eq!(kind_for_name("Chart.PNG"), AttachmentKind::Image);
        assert_eq!(mime_for_name("Chart.PNG"), "image/png");
        assert_eq!(kind_for_name("note.opus"), AttachmentKind::Voice);
        assert_eq!(kind_for_name("report"), AttachmentKind::Document);
        assert_eq!(mime_for_name("report"), "application/octet-stream");
    }

    #[tokio::test]
    async fn the_bytes_stream_from_the_handle_again_for_each_upload() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..(CHUNK_BYTES as usize * 2 + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        let file = opened(&dir, "a.png", &bytes);
        assert_eq!(file.kind, AttachmentKind::Image);
        assert_eq!(file.as_document().kind, AttachmentKind::Document);
        // The path is gone: the handle still reads, twice, whole.
        std::fs::remove_file(dir.path().join("a.png")).unwrap();
        for _ in 0..2 {
            let chunks: Vec<Vec<u8>> = file.chunks().try_collect().await.unwrap();
            assert_eq!(chunks.len(), 3);
            assert_eq!(chunks.concat(), bytes);
        }
    }

    #[tokio::test]
    async fn a_file_that_shrank_since_it_was_opened_fails_the_stream() {
        let dir = tempfile::tempdir().unwrap();
        let file = opened(&dir, "a.txt", b"0123456789");
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("a.txt"))
            .unwrap()
            .set_len(4)
            .unwrap();
        let read: io::Result<Vec<Vec<u8>>> = file.chunks().try_collect().await;
        assert_eq!(read.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
}
