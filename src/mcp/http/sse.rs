//! A `text/event-stream` parser yielding rmcp's events: lines end in LF, CR or CRLF, a blank
//! line ends an event that set any field (an event with an empty `data:` included, as the
//! priming event that carries only an id), comments and unknown fields are skipped. An
//! event, or a line being read, longer than the limit ends the stream with an error before
//! it is buffered.

use std::collections::VecDeque;

use futures_util::stream::{self, BoxStream, Stream, StreamExt};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::SseError;

/// rmcp's event type (`sse_stream::Sse`), named through rmcp's stream type: rmcp re-exports
/// the stream's error type but not this one.
type Sse = <<BoxedSseResponse as Stream>::Item as Outcome>::Ok;

/// The success type of a `Result`.
trait Outcome {
    /// `T` of `Result<T, E>`.
    type Ok;
}

impl<T, E> Outcome for Result<T, E> {
    type Ok = T;
}

/// The byte order mark a stream may start with.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why the stream ended early (inside [`SseError::Body`]).
#[derive(Debug, thiserror::Error)]
pub(super) enum EventError {
    /// An event grew past the transport's `max_sse_event_size`.
    #[error("an SSE event exceeded the maximum size of {max_size} bytes")]
    TooLarge {
        /// The limit in bytes.
        max_size: usize,
    },
}

/// The events of `bytes`, none longer than `max_event_size` bytes.
pub(super) fn events<S, B, E>(bytes: S, max_event_size: usize) -> BoxedSseResponse
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let reader = Reader {
        bytes: bytes
            .map(|chunk| chunk.map_err(|e| SseError::Body(Box::new(e))))
            .boxed(),
        parser: Parser::new(max_event_size),
        failure: None,
        ended: false,
    };
    stream::unfold(reader, |mut reader| async move {
        let item = reader.next().await?;
        Some((item, reader))
    })
    .boxed()
}

/// The state of one stream of events.
struct Reader<B> {
    bytes: BoxStream<'static, Result<B, SseError>>,
    parser: Parser,
    /// The error to yield once the events parsed before it are out.
    failure: Option<SseError>,
    /// No more bytes are read (the body ended or failed).
    ended: bool,
}

impl<B: AsRef<[u8]>> Reader<B> {
    /// The next event, or the error that ends the stream.
    async fn next(&mut self) -> Option<Result<Sse, SseError>> {
        loop {
            if let Some(event) = self.parser.ready.pop_front() {
                return Some(Ok(event));
            }
            if let Some(error) = self.failure.take() {
                return Some(Err(error));
            }
            if self.ended {
                return None;
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => self.failure = self.parser.feed(chunk.as_ref()).err(),
                Some(Err(error)) => self.failure = Some(error),
                None => self.ended = true,
            }
            self.ended |= self.failure.is_some();
        }
    }
}

/// Lines to events.
struct Parser {
    max_event_size: usize,
    /// The line being read, without its end.
    line: Vec<u8>,
    /// Bytes of the current event's lines so far, line ends included.
    kept: usize,
    /// The fields of the current event, once one is set.
    event: Option<Sse>,
    /// The last chunk ended in CR: an LF starting the next one is part of that line end.
    after_cr: bool,
    /// No line has ended yet (the first may start with a byte order mark).
    first_line: bool,
    /// Events complete and not yet yielded.
    ready: VecDeque<Sse>,
}

impl Parser {
    fn new(max_event_size: usize) -> Parser {
        Parser {
            max_event_size,
            line: Vec::new(),
            kept: 0,
            event: None,
            after_cr: false,
            first_line: true,
            ready: VecDeque::new(),
        }
    }

    /// Reads `bytes`, the next part of the stream.
    fn feed(&mut self, mut bytes: &[u8]) -> Result<(), SseError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if std::mem::take(&mut self.after_cr) && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        while let Some(end) = bytes.iter().position(|b| matches!(b, b'\n' | b'\r')) {
            self.extend(&bytes[..end])?;
            self.end_line()?;
            let cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
            if cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        self.extend(bytes)
    }

    /// Adds `part` to the line being read, unless the event would grow past the limit.
    fn extend(&mut self, part: &[u8]) -> Result<(), SseError> {
        let size = self
            .kept
            .saturating_add(self.line.len())
            .saturating_add(part.len());
        if size > self.max_event_size {
            let max_size = self.max_event_size;
            return Err(SseError::Body(Box::new(EventError::TooLarge { max_size })));
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    /// The line read is complete: a blank line ends the event, a comment is skipped, any
    /// other line is a field.
    fn end_line(&mut self) -> Result<(), SseError> {
        let mut line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.first_line) && line.starts_with(BOM) {
            line.drain(..BOM.len());
        }
        if line.is_empty() {
            self.kept = 0;
            self.ready.extend(self.event.take());
            return Ok(());
        }
        if line.first() == Some(&b':') {
            return Ok(());
        }
        self.kept = self.kept.saturating_add(line.len() + 1);
        let (name, value) = match line.iter().position(|b| *b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        self.field(name, value)
    }

    /// Sets field `name` of the current event to `value` (`data` lines are joined by LF).
    fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), SseError> {
        let text = || std::str::from_utf8(value).map_err(SseError::Utf8Parse);
        match name {
            b"data" => {
                let text = text()?;
                let event = self.event.get_or_insert_default();
                match &mut event.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(text);
                    }
                    None => event.data = Some(text.to_owned()),
                }
            }
            b"event" => self.event.get_or_insert_default().event = Some(text()?.to_owned()),
            // An id holding NUL is ignored, as the standard says.
            b"id" if !value.contains(&0) => {
                self.event.get_or_insert_default().id = Some(text()?.to_owned());
            }
            b"retry" => {
                if let Some(millis) = retry(value) {
                    self.event.get_or_insert_default().retry = Some(millis);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// A `retry:` value: ASCII digits only, else ignored.
fn retry(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The events of `chunks` with a limit of `max`, the error text ending them if any.
    async fn parse(chunks: &[&str], max: usize) -> (Vec<Sse>, Option<String>) {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            chunks.iter().map(|c| Ok(c.as_bytes().to_vec())).collect();
        let mut events = events(stream::iter(chunks), max);
        let mut out = Vec::new();
        while let Some(item) = events.next().await {
            match item {
                Ok(event) => out.push(event),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
        (out, None)
    }

    #[tokio::test]
    async fn line_ends_split_across_chunks_and_multi_line_data() {
        let (events, error) = parse(
            &[
                "\u{feff}id: 7\r",
                "\ndata: a\r\ndata:b\r",
                "\r",
                "\nevent: x\n",
            ],
            1024,
        )
        .await;
        assert_eq!(error, None);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].id.as_deref(), Some("7"));
        assert_eq!(events[0].data.as_deref(), Some("a\nb"));
        // The unfinished event at the end of the stream is dropped.
    }

    #[tokio::test]
    async fn a_priming_event_comments_and_unknown_fields() {
        let (events, error) = parse(
            &[
                ": ping\n\nid: p1\ndata:\n\n",
                "foo: bar\nretry: 250\nevent: message\ndata: {}\n\n",
            ],
            1024,
        )
        .await;
        assert_eq!(error, None);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].id.as_deref(), Some("p1"));
        assert_eq!(events[0].data.as_deref(), Some(""));
        assert_eq!(events[1].retry, Some(250));
        assert_eq!(events[1].event.as_deref(), Some("message"));
        assert_eq!(events[1].data.as_deref(), Some("{}"));
    }

    #[tokio::test]
    async fn an_event_past_the_limit_ends_the_stream() {
        let (events, error) = parse(
            &[
                "data: ok\n\n",
                "data: this event is too large\n\ndata: late\n\n",
            ],
            16,
        )
        .await;
        assert_eq!(events.len(), 1);
        assert!(error.unwrap().contains("maximum size of 16 bytes"));
        // Several lines count together, not each on its own.
        let (events, error) = parse(&["data: 0123456\ndata: 0123456\n\n"], 20).await;
        assert!(events.is_empty());
        assert!(error.is_some());
    }
}
