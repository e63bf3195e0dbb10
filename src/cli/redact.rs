//! Credentials on an agent's command line, replaced by `[redacted]` before the command is
//! written anywhere (reports, `exec.json`, the terminal, error messages).
//!
//! What counts as a credential, in any of the forms a command line carries it:
//! - the value after a flag, or in `NAME=value` / `--name=value`, whose name has a word that
//!   says so (`key`, `token`, `secret`, `password`, `auth`, `bearer`, `cookie`, … — `--api-key`,
//!   `OPENAI_API_KEY=`, `--bearer`; not `--max-tokens`);
//! - a header's value in `Name: value` (after `-H`, in `--header=…`, or alone) when the header
//!   carries credentials (`Authorization`, `Proxy-Authorization`, `Cookie`, `x-api-key`,
//!   `x-goog-api-key`, or any name with such a word);
//! - `Bearer …` / `Basic …`, and keys by their well-known prefixes (`sk-`, `AIza`, `ghp_`, …);
//! - a URL's user-info (`https://user:PASS@host`, `https://TOKEN@host`) and its query
//!   parameters with such names (`?key=…`, `&access_token=…`);
//! - the password of `-u`/`--user user:password`.

const REDACTED: &str = "[redacted]";

/// `cmd` with every credential it carries replaced (see the module doc).
pub fn redact(cmd: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(cmd.len());
    let mut next = Next::Keep;
    for a in cmd {
        out.push(match next {
            Next::Hide => REDACTED.to_owned(),
            Next::Header => header(a).unwrap_or_else(|| arg(a)),
            Next::UserPassword => user_password(a),
            Next::Keep => arg(a),
        });
        next = if !a.starts_with('-') || a.contains('=') {
            Next::Keep
        } else if matches!(a.as_str(), "-H" | "--header" | "--headers") {
            Next::Header
        } else if matches!(a.as_str(), "-u" | "--user" | "--proxy-user") {
            Next::UserPassword
        } else if secret_name(a) {
            Next::Hide
        } else {
            Next::Keep
        };
    }
    out
}

/// What the argument after a flag is.
#[derive(Clone, Copy)]
enum Next {
    Keep,
    Hide,
    Header,
    UserPassword,
}

/// One argument on its own: a `Name: value` header, `name=value`, a URL, or a bare value.
fn arg(a: &str) -> String {
    if let Some(h) = header(a) {
        return h;
    }
    if let Some((name, value)) = a.split_once('=')
        && !name.contains("://")
        && !name.is_empty()
    {
        let flag = name.trim_start_matches('-');
        let value = if secret_name(flag) || looks_secret(value) {
            REDACTED.to_owned()
        } else if matches!(flag, "H" | "header" | "headers") {
            header(value).unwrap_or_else(|| value.to_owned())
        } else if matches!(flag, "u" | "user" | "proxy-user") {
            user_password(value)
        } else {
            url(value)
        };
        return format!("{name}={value}");
    }
    if looks_secret(a) { REDACTED.to_owned() } else { url(a) }
}

/// Whether a flag's or variable's name says it holds a credential: one of its words (split at
/// `-`, `_`, `.`) is such a word, or ends in `key` / `token` (`apikey`, `xapikey`).
fn secret_name(name: &str) -> bool {
    const WORDS: [&str; 15] = [
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "pass",
        "auth",
        "authorization",
        "bearer",
        "credential",
        "credentials",
        "cookie",
        "pat",
        "apikey",
    ];
    let name = name.trim_start_matches('-').to_ascii_lowercase();
    name.split(['-', '_', '.'])
        .any(|w| WORDS.contains(&w) || (w.len() > 3 && (w.ends_with("key") || w.ends_with("token"))))
}

/// A value that is a credential by its form: `Bearer …`, `Basic …`, or a key with a
/// provider's well-known prefix.
fn looks_secret(v: &str) -> bool {
    const PREFIXES: [&str; 11] =
        ["sk-", "AIza", "xoxb-", "xoxp-", "ghp_", "gho_", "ghs_", "github_pat_", "glpat-", "hf_", "ya29."];
    let v = v.trim();
    let scheme = ["Bearer ", "Basic ", "bearer ", "basic "].iter().any(|s| v.starts_with(s));
    scheme || (v.len() > 8 && !v.contains(char::is_whitespace) && PREFIXES.iter().any(|p| v.starts_with(p)))
}

/// `Name: value` with its value redacted when the header carries credentials; `None` when `a`
/// is not a header line.
fn header(a: &str) -> Option<String> {
    let (name, value) = a.split_once(':')?;
    let valid = !value.starts_with("//")
        && !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid {
        return None;
    }
    let credential = matches!(name.to_ascii_lowercase().as_str(), "authorization" | "proxy-authorization" | "cookie")
        || secret_name(name);
    Some(if credential { format!("{name}: {REDACTED}") } else { a.to_owned() })
}

/// `user:password` with the password redacted (a lone `user` kept).
fn user_password(a: &str) -> String {
    match a.split_once(':') {
        Some((user, _)) => format!("{user}:{REDACTED}"),
        None => a.to_owned(),
    }
}

/// A URL with its user-info and secret-named query values redacted; any other text as it is.
fn url(a: &str) -> String {
    let Some(scheme_end) = a.find("://") else { return a.to_owned() };
    let (scheme, rest) = a.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((info, host)) => match info.split_once(':') {
            Some((user, _)) => format!("{user}:{REDACTED}@{host}"),
            None => format!("{REDACTED}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let (query, fragment) = query.split_once('#').map_or((query, None), |(q, f)| (q, Some(f)));
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if secret_name(k) || matches!(k, "sig" | "signature") => format!("{k}={REDACTED}"),
                    _ => p.to_owned(),
                })
                .collect();
            let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
            format!("{path}?{}{fragment}", params.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(cmd: &[&str]) -> Vec<String> {
        redact(&cmd.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn flags_and_variables_by_name() {
        assert_eq!(
            r(&["agent", "--api-key", "sk-live-1234567890", "--model", "gpt-4o", "TOKEN=abc", "sk-proj-abcdefghij"]),
            ["agent", "--api-key", "[redacted]", "--model", "gpt-4o", "TOKEN=[redacted]", "[redacted]"]
        );
        assert_eq!(
            r(&["--bearer", "B", "--token=T", "OPENAI_API_KEY=x"]),
            ["--bearer", "[redacted]", "--token=[redacted]", "OPENAI_API_KEY=[redacted]"]
        );
        // Words, not substrings: a token budget is no token.
        assert_eq!(
            r(&["--max-tokens", "100", "--stream", "--keyboard", "us"]),
            ["--max-tokens", "100", "--stream", "--keyboard", "us"]
        );
        assert_eq!(
            r(&["--password", "p", "--client-secret", "s", "--apikey", "k"]),
            ["--password", "[redacted]", "--client-secret", "[redacted]", "--apikey", "[redacted]"]
        );
    }

    #[test]
    fn headers_in_every_form() {
        assert_eq!(
            r(&["-H", "Authorization: Bearer sk-X", "-H", "x-api-key: Y", "--header=x-goog-api-key: Z"]),
            ["-H", "Authorization: [redacted]", "-H", "x-api-key: [redacted]", "--header=x-goog-api-key: [redacted]"]
        );
        assert_eq!(
            r(&["-H", "Content-Type: application/json", "Cookie: a=b"]),
            ["-H", "Content-Type: application/json", "Cookie: [redacted]"]
        );
        assert_eq!(
            r(&["--header", "X-Auth-Token: t", "Proxy-Authorization: Basic dTpw"]),
            ["--header", "X-Auth-Token: [redacted]", "Proxy-Authorization: [redacted]"]
        );
        assert_eq!(r(&["Bearer abc"]), ["[redacted]"]);
    }

    #[test]
    fn urls_and_users() {
        assert_eq!(r(&["https://u:PASS@h/x?q=1"]), ["https://u:[redacted]@h/x?q=1"]);
        assert_eq!(r(&["https://ghp_tokenvalue@github.com/o/r"]), ["https://[redacted]@github.com/o/r"]);
        assert_eq!(r(&["--url=http://h/v1?key=AIzaXYZ&alt=sse#f"]), ["--url=http://h/v1?key=[redacted]&alt=sse#f"]);
        assert_eq!(
            r(&["http://127.0.0.1:8080/v1", "-u", "me:pw", "--user=me:pw"]),
            ["http://127.0.0.1:8080/v1", "-u", "me:[redacted]", "--user=me:[redacted]"]
        );
        // Plain text stays as it is.
        assert_eq!(
            r(&["python", "agent.py", "--api", "chat", "a=b", "see: this"]),
            ["python", "agent.py", "--api", "chat", "a=b", "see: this"]
        );
    }
}
