//! `GET /`: the chat panel, shipped inside the binary (no CDN, no separate server). The page,
//! its script and its style sheet are embedded with `include_str!` from `host/assets/` and
//! served with a strict Content-Security-Policy: scripts and styles only from this origin,
//! no inline script, requests only back to this server. Replies are rendered as markdown by
//! `panel-render.js` with the bundled `vendor/markdown.js` (markdown-it + lowlight, built by
//! `scripts/vendor-panel`; the Rust build only embeds the committed file). See `docs/panel.md`.

use axum::{
    http::{header, HeaderName},
    response::{IntoResponse, Response},
};

const HTML: &str = include_str!("../../assets/panel.html");
const SCRIPT: &str = include_str!("../../assets/panel.js");
const STYLE: &str = include_str!("../../assets/panel.css");
const RENDER_SCRIPT: &str = include_str!("../../assets/panel-render.js");
const RENDER_STYLE: &str = include_str!("../../assets/panel-render.css");
const A11Y_SCRIPT: &str = include_str!("../../assets/panel-a11y.js");
const VENDOR_MARKDOWN: &str = include_str!("../../assets/vendor/markdown.js");

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

/// `GET /assets/panel-render.js`: our markdown rendering (token stream to DOM nodes).
pub(super) async fn render_script() -> Response {
    asset("text/javascript; charset=utf-8", RENDER_SCRIPT)
}

/// `GET /assets/panel-render.css`: rendered markdown, code highlighting, copy buttons.
pub(super) async fn render_style() -> Response {
    asset("text/css; charset=utf-8", RENDER_STYLE)
}

/// `GET /assets/panel-a11y.js`: live status of tool calls, the announcer, dialogs' focus,
/// the rojo's tools line and the phone placeholder (docs/panel.md, "Accessibility").
pub(super) async fn a11y_script() -> Response {
    asset("text/javascript; charset=utf-8", A11Y_SCRIPT)
}

/// `GET /assets/vendor/markdown.js`: the bundled markdown-it and lowlight.
pub(super) async fn vendor_markdown() -> Response {
    asset("text/javascript; charset=utf-8", VENDOR_MARKDOWN)
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
            (render_script().await, "text/javascript"),
            (render_style().await, "text/css"),
            (a11y_script().await, "text/javascript"),
            (vendor_markdown().await, "text/javascript"),
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
        assert!(HTML.contains(r#"<script src="/assets/vendor/markdown.js""#));
        assert!(HTML.contains(r#"<script src="/assets/panel-render.js""#));
        assert!(HTML.contains(r#"<script src="/assets/panel-a11y.js""#));
        assert!(HTML.contains(r#"href="/assets/panel-render.css""#));
        assert!(!HTML.contains("http://") && !HTML.contains("https://"));
        // Our own scripts never parse markup: model text becomes text nodes, markdown becomes
        // elements created one token at a time (docs/panel.md, "Safety").
        for (name, script) in [
            ("panel.js", SCRIPT),
            ("panel-render.js", RENDER_SCRIPT),
            ("panel-a11y.js", A11Y_SCRIPT),
        ] {
            for parser in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "DOMParser",
                ".render(",
            ] {
                assert!(
                    !script.contains(parser),
                    "{name} uses {parser}: model text is set as text only"
                );
            }
        }
    }
}
