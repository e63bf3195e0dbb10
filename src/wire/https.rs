//! The HTTP client tracefault reaches the user's own endpoints with (real providers, tool
//! backends, a real MCP server over streamable HTTP): rustls with the ring crypto provider,
//! the system's trusted roots and the bundled Mozilla roots, no redirects followed.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};

/// How long connecting to an endpoint may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A client for the user's endpoints. A redirect is handed back as it came (an endpoint that
/// moves is the user's to follow, not ours).
pub fn client() -> Result<reqwest::Client> {
    let failed = |e: &dyn std::fmt::Display| Error::Usage(format!("cannot start the HTTP client: {e}"));
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    // The system's store as far as it reads: a missing or unreadable one leaves the bundle.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| failed(&e))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_builds_twice_in_one_process() {
        super::client().unwrap();
        super::client().unwrap();
    }
}
