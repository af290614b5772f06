//! The dashboard at `/` (docs/http.md, "The dashboard"): one page embedded in the
//! binary. It fetches `/v1/retention` with a `read` token the operator
//! types or passes in the URL fragment, so the page itself needs none.
//!
//! The page is served with a Content-Security-Policy that allows only its
//! own inline script and style (by hash) and requests to this origin: even
//! a node name crafted as markup, or an edit that adds a CDN link, cannot
//! make the browser contact anything else.

use std::sync::LazyLock;

use base64::Engine;
use sha2::Digest;

const PAGE: &str = include_str!("dashboard.html");

/// The page with this sidecar's tick filled in (it refreshes every tick).
pub fn page(tick: std::time::Duration) -> String {
    PAGE.replace("{{TICK_MS}}", &tick.as_millis().to_string())
}

/// The Content-Security-Policy header for [`page`].
pub fn content_security_policy() -> &'static str {
    static CSP: LazyLock<String> = LazyLock::new(|| {
        format!(
            "default-src 'none'; script-src '{}'; style-src '{}'; connect-src 'self'; \
             img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            inline_hash("script"),
            inline_hash("style")
        )
    });
    &CSP
}

/// `sha256-…` of the one inline `<tag>` block's text, as CSP wants it.
fn inline_hash(tag: &str) -> String {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let body = PAGE
        .split_once(&open)
        .and_then(|(_, rest)| rest.split_once(&close))
        .map_or("", |(body, _)| body);
    let digest = sha2::Sha256::digest(body.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_self_contained() {
        let p = page(std::time::Duration::from_secs(10));
        assert!(p.contains(r#"content="10000""#));
        // One inline script and one inline style, nothing fetched from
        // elsewhere: no src= or href= but the empty icon.
        assert_eq!(p.matches("<script>").count(), 1);
        assert_eq!(p.matches("<style>").count(), 1);
        assert!(!p.contains("src="), "an external script or image");
        assert_eq!(p.matches("href=").count(), 1);
        assert!(p.contains(r#"href="data:,""#));
        assert!(!p.contains("http://") && !p.contains("https://"));
        assert!(
            !p.contains("innerHTML"),
            "text only, never markup from data"
        );
    }

    #[test]
    fn the_policy_names_the_inline_blocks_by_hash() {
        let csp = content_security_policy();
        assert!(csp.starts_with("default-src 'none'; script-src 'sha256-"));
        assert_ne!(inline_hash("script"), inline_hash("nothing"));
        assert!(csp.contains("connect-src 'self'"));
    }
}
