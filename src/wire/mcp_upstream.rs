//! The user's real MCP server behind the mocks (`tracefault mcp-proxy SCENARIO -- CMD`, or
//! `--upstream URL`): started as a child over stdio, or reached over streamable HTTP, with the
//! official Rust SDK's client; its tools listed to the host as they are, and each call that no
//! fault of the scenario stops forwarded to it and its answer passed back unchanged.

use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData, Tool};
use rmcp::service::{RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

use crate::error::{Error, Result};

/// How long the server may take to answer `initialize`, and a call.
const START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// A real MCP server, started and initialised.
pub struct RealServer {
    client: RunningService<RoleClient, ()>,
    /// Calls forwarded to it so far.
    forwarded: AtomicU64,
}

impl RealServer {
    /// Starts `cmd` (the program, then its arguments) and initialises it; its stderr is ours.
    pub async fn start(cmd: &[String]) -> Result<RealServer> {
        let (program, args) = cmd.split_first().ok_or_else(|| Error::Usage("mcp-proxy: no server command".into()))?;
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        let transport = TokioChildProcess::new(command)
            .map_err(|e| Error::Usage(format!("mcp-proxy: cannot start {program}: {e}")))?;
        Self::initialise(program, ().serve(transport)).await
    }

    /// Connects to the server at `url` over streamable HTTP and initialises it, sending
    /// `bearer` (without `Bearer `) as its authorization if given. A server of the older
    /// HTTP+SSE transport is refused by the handshake.
    pub async fn connect(url: &str, bearer: Option<String>) -> Result<RealServer> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| Error::Usage(format!("mcp-proxy --upstream {url:?}: not a URL ({e})")))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Error::Usage(format!("mcp-proxy --upstream {url:?}: expected an http:// or https:// URL")));
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(url);
        if let Some(token) = bearer {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::with_client(super::https::client()?, config);
        Self::initialise(url, ().serve(transport)).await
    }

    /// Waits for the handshake of the server called `name` (in errors), up to [`START_TIMEOUT`].
    async fn initialise<E: std::fmt::Display>(
        name: &str,
        handshake: impl std::future::Future<Output = std::result::Result<RunningService<RoleClient, ()>, E>>,
    ) -> Result<RealServer> {
        let client = tokio::time::timeout(START_TIMEOUT, handshake)
            .await
            .map_err(|_| {
                Error::Usage(format!(
                    "mcp-proxy: {name} did not answer initialize within {} s",
                    START_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| {
                Error::Usage(format!("mcp-proxy: {name} did not initialise as an MCP server: {}", said(&e)))
            })?;
        Ok(RealServer { client, forwarded: AtomicU64::new(0) })
    }

    /// Its tools, every page.
    pub async fn tools(&self) -> std::result::Result<Vec<Tool>, ErrorData> {
        self.client.list_all_tools().await.map_err(|e| unreachable_server(&e))
    }

    /// Forwards a call; its answer as the server gave it (a server silent for
    /// [`CALL_TIMEOUT`] is an error).
    pub async fn call(&self, request: CallToolRequestParams) -> std::result::Result<CallToolResponse, ErrorData> {
        self.forwarded.fetch_add(1, Ordering::SeqCst);
        let answer = tokio::time::timeout(CALL_TIMEOUT, self.client.call_tool_once(request)).await.map_err(|_| {
            ErrorData::internal_error(
                format!("tracefault mcp-proxy: the real MCP server did not answer within {} s", CALL_TIMEOUT.as_secs()),
                None,
            )
        })?;
        answer.map_err(|e| match e {
            rmcp::ServiceError::McpError(data) => data,
            other => unreachable_server(&other),
        })
    }

    /// Calls forwarded so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::SeqCst)
    }

    /// Stops the server.
    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

/// An error of the SDK's, for a terminal: on one line, without the transport's type name, the
/// server's part (an HTML error page, say) cut short, control characters shown escaped.
fn said(e: &impl std::fmt::Display) -> String {
    const MAX_CHARS: usize = 300;
    let text = e.to_string();
    let text = match text.find("] error: ") {
        Some(i) if text.starts_with("Send message error Transport [") => &text[i + "] error: ".len()..],
        _ => &text,
    };
    let mut line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = line.char_indices().nth(MAX_CHARS) {
        line.truncate(cut);
        line.push('…');
    }
    crate::escape::printable(&line).into_owned()
}

fn unreachable_server(e: &rmcp::ServiceError) -> ErrorData {
    ErrorData::internal_error(format!("tracefault mcp-proxy: the real MCP server did not answer: {}", said(e)), None)
}

#[cfg(test)]
mod tests {
    use super::said;

    #[test]
    fn an_sdk_error_is_said_on_one_short_line() {
        let e = "Send message error Transport [rmcp::transport::worker::WorkerTransport<X<Y>>] error: \
                 unexpected server response: HTTP 404 Not Found: <html>\n<pre>Cannot POST</pre>\x1b[2J, when send initialize request";
        assert_eq!(
            said(&e),
            "unexpected server response: HTTP 404 Not Found: <html> <pre>Cannot POST</pre>\\u{1b}[2J, when send initialize request"
        );
        let long = "x".repeat(400);
        assert_eq!(said(&long).chars().count(), 301);
        assert_eq!(said(&"connection refused"), "connection refused");
    }
}
