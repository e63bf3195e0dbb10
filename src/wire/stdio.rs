//! MCP over stdio (`tracefault mcp --stdio`): one JSON-RPC message a line each way. The client
//! is read only while fewer than [`IN_FLIGHT`] of its requests wait for their answers to be
//! written, so a client that does not read its answers stops being read and memory stays
//! bounded. A line the SDK cannot read gets the JSON-RPC answer here: `-32700` with `id: null`
//! for text that is not JSON, `-32600` or `-32602` with the request's id for a message of the
//! wrong shape (the SDK would drop the first and answer the others without their id).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};

use super::dispatch::MAX_BODY_BYTES;
use super::jsonrpc::{check, jsonrpc_error, read_message};

/// Requests read and not yet answered, at most: the next line waits for an answer to go out.
pub const IN_FLIGHT: usize = 64;

/// The SDK's transport over a reader and a writer of lines (stdin and stdout).
pub struct Lines<W> {
    incoming: mpsc::Receiver<ClientJsonRpcMessage>,
    out: Arc<tokio::sync::Mutex<W>>,
    pending: Arc<Pending>,
}

/// The requests read whose answers are not written yet: a slot each.
struct Pending {
    slots: Semaphore,
    ids: Mutex<HashSet<RequestId>>,
}

impl Pending {
    fn ids(&self) -> MutexGuard<'_, HashSet<RequestId>> {
        self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Request `id` is answered (or cancelled by the client): its slot is free.
    fn done(&self, id: &RequestId) {
        if self.ids().remove(id) {
            self.slots.add_permits(1);
        }
    }
}

/// Messages from `input`, one a line, and answers to `output`.
pub fn lines<R, W>(input: R, output: W) -> Lines<W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, incoming) = mpsc::channel(1);
    let out = Arc::new(tokio::sync::Mutex::new(output));
    let pending = Arc::new(Pending { slots: Semaphore::new(IN_FLIGHT), ids: Mutex::default() });
    tokio::spawn(read(BufReader::new(input), out.clone(), pending.clone(), tx));
    Lines { incoming, out, pending }
}

/// Reads lines while there is a slot for one more request, until the end of the input (or the
/// SDK stops listening), answering those the SDK cannot read.
async fn read<R, W>(
    mut input: BufReader<R>,
    out: Arc<tokio::sync::Mutex<W>>,
    pending: Arc<Pending>,
    tx: mpsc::Sender<ClientJsonRpcMessage>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    loop {
        let Ok(slot) = pending.slots.acquire().await else { return };
        line.clear();
        let fits = match read_line(&mut input, &mut line).await {
            Ok(Some(fits)) => fits,
            Ok(None) | Err(_) => return,
        };
        let message = match screen(&line, fits) {
            Screened::Message(m) => *m,
            Screened::Answer(error) => {
                if write(&out, &error).await.is_err() {
                    return;
                }
                continue;
            }
            Screened::Skip => continue,
        };
        match &message {
            JsonRpcMessage::Request(r) => {
                if !pending.ids().insert(r.id.clone()) {
                    let error = jsonrpc_error(
                        serde_json::to_value(&r.id).unwrap_or_default(),
                        -32600,
                        "Invalid Request: this id is already a request's that is not answered yet",
                    );
                    if write(&out, &error).await.is_err() {
                        return;
                    }
                    continue;
                }
                // Its slot is given back when its answer is written.
                slot.forget();
            }
            JsonRpcMessage::Notification(n) => {
                // The SDK sends no answer to a cancelled request.
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    pending.done(id);
                }
            }
            _ => {}
        }
        if tx.send(message).await.is_err() {
            return;
        }
    }
}

/// The next line of `input` into `line` (at most [`MAX_BODY_BYTES`], the HTTP endpoint's limit:
/// a longer one is read to its end and dropped): whether it fits, or `None` at the end of input.
async fn read_line<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<bool>> {
    let mut fits = true;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok((!line.is_empty() || !fits).then_some(fits));
        }
        let (take, end) = match memchr::memchr(b'\n', available) {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if fits && line.len() + take <= MAX_BODY_BYTES + 2 {
            line.extend_from_slice(&available[..take]);
        } else {
            fits = false;
            line.clear();
        }
        input.consume(take);
        if end {
            return Ok(Some(fits));
        }
    }
}

/// What to do with a line.
enum Screened {
    Message(Box<ClientJsonRpcMessage>),
    /// An error to answer, the SDK never seeing the line.
    Answer(Value),
    /// Nothing: a blank line, or a notification or response the SDK does not read.
    Skip,
}

fn screen(line: &[u8], fits: bool) -> Screened {
    if !fits {
        let too_long = format!("Invalid Request: a message over {MAX_BODY_BYTES} bytes");
        return Screened::Answer(jsonrpc_error(Value::Null, -32600, too_long));
    }
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Screened::Skip;
    }
    match check(line).map(read_message) {
        Ok(Ok(m)) => Screened::Message(Box::new(m)),
        Ok(Err(Some(error))) | Err(error) => Screened::Answer(error),
        Ok(Err(None)) => Screened::Skip,
    }
}

/// Writes one message as a line, at once.
async fn write<W: AsyncWrite + Unpin>(
    out: &tokio::sync::Mutex<W>,
    message: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    let mut out = out.lock().await;
    out.write_all(&line).await?;
    out.flush().await
}

impl<W: AsyncWrite + Unpin + Send + 'static> Transport<RoleServer> for Lines<W> {
    type Error = std::io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let (out, pending) = (self.out.clone(), self.pending.clone());
        async move {
            let answered = match &item {
                JsonRpcMessage::Response(r) => Some(r.id.clone()),
                JsonRpcMessage::Error(e) => e.id.clone(),
                _ => None,
            };
            write(&out, &item).await?;
            if let Some(id) = answered {
                pending.done(&id);
            }
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ClientJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.out.lock().await.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> Option<(Value, i64)> {
        match screen(line.as_bytes(), true) {
            Screened::Answer(e) => Some((e["id"].clone(), e["error"]["code"].as_i64()?)),
            _ => None,
        }
    }

    #[test]
    fn lines_the_sdk_cannot_read_are_answered_with_their_id() {
        assert_eq!(answer("{not json\n"), Some((Value::Null, -32700)));
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"str"}"#),
            Some((7.into(), -32602))
        );
        assert_eq!(answer("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\r\n"), None);
        assert!(matches!(screen(b"  \n", true), Screened::Skip));
        assert!(matches!(screen(b"x", false), Screened::Answer(_)));
    }

    #[tokio::test]
    async fn an_unread_client_is_not_read_past_the_requests_in_flight() {
        let requests: String = (0..IN_FLIGHT + 10)
            .map(|id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n"))
            .collect();
        let mut t = lines(std::io::Cursor::new(requests.into_bytes()), tokio::io::sink());
        let mut read = Vec::new();
        for _ in 0..IN_FLIGHT {
            read.push(t.receive().await.unwrap());
        }
        let stalled = tokio::time::timeout(std::time::Duration::from_millis(50), t.receive()).await;
        assert!(stalled.is_err(), "no request past {IN_FLIGHT} unanswered ones");
        let JsonRpcMessage::Request(first) = &read[0] else { panic!() };
        let answer = ServerJsonRpcMessage::response(rmcp::model::ServerResult::empty(()), first.id.clone());
        t.send(answer).await.unwrap();
        assert!(t.receive().await.is_some(), "an answer written frees a slot");
    }
}
