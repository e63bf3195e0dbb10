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
    /// Over HTTP: its URL as given and as parsed, each replaced by the URL as shown in what
    /// is said of it.
    hidden: Vec<(String, String)>,
}

impl RealServer {
    /// Starts `cmd` (the program, then its arguments) and initialises it; its stderr is ours.
    pub async fn start(cmd: &[String]) -> Result<RealServer> {
        let (program, args) = cmd.split_first().ok_or_else(|| Error::Usage("mcp-proxy: no server command".into()))?;
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        let transport = TokioChildProcess::new(command)
            .map_err(|e| Error::Usage(format!("mcp-proxy: cannot start {program}: {e}")))?;
        Self::initialise(program, ().serve(transport), Vec::new()).await
    }

    /// Connects to the server at `url` over streamable HTTP and initialises it, sending
    /// `bearer` (without `Bearer `) as its authorization if given. A server of the older
    /// HTTP+SSE transport is refused by the handshake.
    pub async fn connect(url: &str, bearer: Option<String>) -> Result<RealServer> {
        // The URL is not echoed: its query or user part may hold a key.
        let parsed = reqwest::Url::parse(url).map_err(|e| {
            Error::Usage(format!("mcp-proxy --upstream: not a URL ({e}; the value is not shown: it may hold a key)"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(Error::Usage(
                "mcp-proxy --upstream: expected an http:// or https:// URL (the value is not shown: it may hold a key)"
                    .into(),
            ));
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(url);
        if let Some(token) = bearer {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::with_client(super::https::client()?, config);
        let shown = shown(&parsed);
        // As given, as parsed, and as the HTTP client says it (without its user part).
        let mut anonymous = parsed.clone();
        let _ = anonymous.set_username("");
        let _ = anonymous.set_password(None);
        let hidden: Vec<(String, String)> = [url, parsed.as_str(), anonymous.as_str()]
            .into_iter()
            .filter(|raw| *raw != shown)
            .map(|raw| (raw.to_owned(), shown.clone()))
            .collect();
        Self::initialise(&shown, ().serve(transport), hidden).await
    }

    /// Waits for the handshake of the server called `name` (in errors), up to [`START_TIMEOUT`];
    /// `hidden` is what its errors must not say ([`RealServer::hidden`]).
    async fn initialise<E: std::fmt::Display>(
        name: &str,
        handshake: impl std::future::Future<Output = std::result::Result<RunningService<RoleClient, ()>, E>>,
        hidden: Vec<(String, String)>,
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
                Error::Usage(format!("mcp-proxy: {name} did not initialise as an MCP server: {}", said(&e, &hidden)))
            })?;
        Ok(RealServer { client, forwarded: AtomicU64::new(0), hidden })
    }

    /// Its tools, every page.
    pub async fn tools(&self) -> std::result::Result<Vec<Tool>, ErrorData> {
        self.client.list_all_tools().await.map_err(|e| self.unreachable(&e))
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
            other => self.unreachable(&other),
        })
    }

    /// A call the server did not answer, said without its URL's secrets.
    fn unreachable(&self, e: &rmcp::ServiceError) -> ErrorData {
        let text = said(e, &self.hidden);
        ErrorData::internal_error(format!("tracefault mcp-proxy: the real MCP server did not answer: {text}"), None)
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

/// A URL as it may be shown: its scheme, host, port and path (no user, password or query,
/// which may hold a key), control characters escaped.
fn shown(url: &reqwest::Url) -> String {
    let mut bare = url.clone();
    bare.set_query(None);
    bare.set_fragment(None);
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    crate::escape::printable(bare.as_str()).into_owned()
}

/// An error of the SDK's, for a terminal: each `(raw, shown)` of `hidden` said as shown (before
/// anything is cut, so no part of a raw URL is left), on one line, without the transport's
/// type name, the server's part (an HTML error page, say) cut short, control characters shown
/// escaped.
fn said(e: &impl std::fmt::Display, hidden: &[(String, String)]) -> String {
    const MAX_CHARS: usize = 300;
    let text = hidden.iter().fold(e.to_string(), |t, (raw, shown)| t.replace(raw.as_str(), shown));
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

#[cfg(test)]
mod tests {
    use super::said;

    #[test]
    fn an_sdk_error_is_said_on_one_short_line() {
        let e = "Send message error Transport [rmcp::transport::worker::WorkerTransport<X<Y>>] error: \
                 unexpected server response: HTTP 404 Not Found: <html>\n<pre>Cannot POST</pre>\x1b[2J, when send initialize request";
        assert_eq!(
            said(&e, &[]),
            "unexpected server response: HTTP 404 Not Found: <html> <pre>Cannot POST</pre>\\u{1b}[2J, when send initialize request"
        );
        let long = "x".repeat(400);
        assert_eq!(said(&long, &[]).chars().count(), 301);
        assert_eq!(said(&"connection refused", &[]), "connection refused");
    }
}
