//! `GET /`: the chat panel, shipped inside the binary (no CDN, no separate server). The page,
//! its script and its style sheet are embedded with `include_str!` from `host/assets/` and
//! served with a strict Content-Security-Policy: scripts and styles only from this origin,
//! no inline script, requests only back to this server. See `docs/panel.md`.

use axum::{
    http::{header, HeaderName},
    response::{IntoResponse, Response},
};

const HTML: &str = include_str!("../../assets/panel.html");
const SCRIPT: &str = include_str!("../../assets/panel.js");
const STYLE: &str = include_str!("../../assets/panel.css");
/// Conversation management: the sidebar's menu and search, Regenerate and Edit.
const CONVERSATIONS_SCRIPT: &str = include_str!("../../assets/panel-conversations.js");
const CONVERSATIONS_STYLE: &str = include_str!("../../assets/panel-conversations.css");

/// The policy every panel response carries.
pub(super) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the page.
pub(super) async fn index() -> Response {
    asset("text/html; charset=utf-8", HTML)
}

/// `GET /assets/panel.js`: the page's script.
pub(super) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /assets/panel.css`: the page's style sheet.
pub(super) async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// `GET /assets/panel-conversations.js`: conversation management.
pub(super) async fn conversations_script() -> Response {
    asset("text/javascript; charset=utf-8", CONVERSATIONS_SCRIPT)
}

/// `GET /assets/panel-conversations.css`: its style sheet.
pub(super) async fn conversations_style() -> Response {
    asset("text/css; charset=utf-8", CONVERSATIONS_STYLE)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-cache"),
            (
                HeaderName::from_static("cross-origin-opener-policy"),
                "same-origin",
            ),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_page_is_served_with_a_strict_policy() {
        for (response, kind) in [
            (index().await, "text/html"),
            (script().await, "text/javascript"),
            (style().await, "text/css"),
            (conversations_script().await, "text/javascript"),
            (conversations_style().await, "text/css"),
        ] {
            let headers = response.headers();
            assert!(headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with(kind));
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(csp.contains("default-src 'self'"));
            assert!(!csp.contains("unsafe-inline"), "{csp}");
        }
    }

    #[test]
    fn the_page_loads_its_script_and_style_from_this_server_only() {
        assert!(HTML.contains(r#"<script src="/assets/panel.js""#));
        assert!(HTML.contains(r#"href="/assets/panel.css""#));
        assert!(!HTML.contains("http://") && !HTML.contains("https://"));
        assert!(HTML.contains(r#"<script src="/assets/panel-conversations.js" defer>"#));
        for script in [SCRIPT, CONVERSATIONS_SCRIPT] {
            assert!(
                !script.contains("innerHTML"),
                "model text is set as text only"
            );
        }
    }
}
