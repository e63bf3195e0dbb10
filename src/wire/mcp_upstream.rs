//! The user's real MCP server behind the mocks (`tracefault mcp-proxy SCENARIO -- CMD`): started
//! as a child over stdio with the official Rust SDK's client, its tools listed to the host as
//! they are, and each call that no fault of the scenario stops forwarded to it and its answer
//! passed back unchanged.

use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData, Tool};
use rmcp::service::{RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;

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
        let client = tokio::time::timeout(START_TIMEOUT, ().serve(transport))
            .await
            .map_err(|_| {
                Error::Usage(format!(
                    "mcp-proxy: {program} did not answer initialize within {} s",
                    START_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|e| Error::Usage(format!("mcp-proxy: {program} did not initialise as an MCP server: {e}")))?;
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

fn unreachable_server(e: &rmcp::ServiceError) -> ErrorData {
    ErrorData::internal_error(format!("tracefault mcp-proxy: the real MCP server did not answer: {e}"), None)
}
