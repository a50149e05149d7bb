//! `GET /`: the chat panel, shipped inside the binary (no CDN, no separate server). The page
//! and its scripts and style sheets ([`ASSETS`]) are embedded with `include_str!` from
//! `server/assets/` and served with a strict Content-Security-Policy: scripts and styles only
//! from this origin, no inline script, requests only back to this server. Replies are
//! rendered as markdown by `panel-render.js` with the bundled `vendor/markdown.js`
//! (markdown-it + lowlight, and jsdiff for the line diffs, built by `scripts/vendor-panel`; the Rust build only embeds the
//! committed file). See `docs/panel.md`.

use axum::{
    extract::Path,
    http::{header, HeaderName, StatusCode},
    response::{IntoResponse, Response},
};

const HTML: &str = include_str!("../../assets/panel.html");

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Every file under `/assets/`: its name there, its content type and its text. The page
/// loads them in `panel.html`; a name not listed here is `404`.
const ASSETS: &[(&str, &str, &str)] = &[
    ("panel.js", JS, include_str!("../../assets/panel.js")),
    ("panel.css", CSS, include_str!("../../assets/panel.css")),
    // Undo of a turn's file changes: the bar after a turn and its buttons.
    (
        "panel-undo.js",
        JS,
        include_str!("../../assets/panel-undo.js"),
    ),
    (
        "panel-undo.css",
        CSS,
        include_str!("../../assets/panel-undo.css"),
    ),
    // "Earlier messages summarised": where a summary stands for the older messages.
    (
        "panel-compaction.js",
        JS,
        include_str!("../../assets/panel-compaction.js"),
    ),
    (
        "panel-compaction.css",
        CSS,
        include_str!("../../assets/panel-compaction.css"),
    ),
    // Markdown rendering: our token-stream-to-DOM code and the bundled libraries.
    (
        "panel-render.js",
        JS,
        include_str!("../../assets/panel-render.js"),
    ),
    (
        "panel-render.css",
        CSS,
        include_str!("../../assets/panel-render.css"),
    ),
    (
        "vendor/markdown.js",
        JS,
        include_str!("../../assets/vendor/markdown.js"),
    ),
    // Line diffs (jsdiff, in the bundle), the approval box's sentences, a turn's file changes.
    (
        "panel-diff.js",
        JS,
        include_str!("../../assets/panel-diff.js"),
    ),
    (
        "panel-what.js",
        JS,
        include_str!("../../assets/panel-what.js"),
    ),
    (
        "panel-changes.js",
        JS,
        include_str!("../../assets/panel-changes.js"),
    ),
    (
        "panel-changes.css",
        CSS,
        include_str!("../../assets/panel-changes.css"),
    ),
    // Keyboard shortcuts, Escape and the tab's title; the first-run card.
    (
        "panel-keys.js",
        JS,
        include_str!("../../assets/panel-keys.js"),
    ),
    (
        "panel-firstrun.js",
        JS,
        include_str!("../../assets/panel-firstrun.js"),
    ),
    // Approvals: the buttons on a waiting call's activity line (docs/panel.md, "Approvals").
    (
        "panel-approve.js",
        JS,
        include_str!("../../assets/panel-approve.js"),
    ),
    (
        "panel-approve.css",
        CSS,
        include_str!("../../assets/panel-approve.css"),
    ),
    // Conversation management: the sidebar's menu and search, Regenerate and Edit.
    (
        "panel-conversations.js",
        JS,
        include_str!("../../assets/panel-conversations.js"),
    ),
    (
        "panel-conversations.css",
        CSS,
        include_str!("../../assets/panel-conversations.css"),
    ),
    // The files pane: the project's tree, a file's text, download and upload.
    (
        "panel-files.js",
        JS,
        include_str!("../../assets/panel-files.js"),
    ),
    (
        "panel-files.css",
        CSS,
        include_str!("../../assets/panel-files.css"),
    ),
    // Live status and accessibility: the growing tool-call line, announcements, dialogs.
    (
        "panel-a11y.js",
        JS,
        include_str!("../../assets/panel-a11y.js"),
    ),
];

/// The policy every panel response carries.
pub(super) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// `GET /`: the page.
pub(super) async fn index() -> Response {
    asset("text/html; charset=utf-8", HTML)
}

/// `GET /assets/{*name}`: one of [`ASSETS`].
pub(super) async fn named_asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => asset(content_type, body),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
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
    async fn the_page_and_every_asset_are_served_with_a_strict_policy() {
        let mut responses = vec![(index().await, "text/html")];
        for (name, content_type, _) in ASSETS {
            responses.push((named_asset(Path((*name).to_owned())).await, content_type));
        }
        for (response, kind) in responses {
            assert_eq!(response.status(), StatusCode::OK);
            let headers = response.headers();
            assert!(headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with(kind.split(';').next().unwrap()));
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(csp.contains("default-src 'self'"));
            assert!(!csp.contains("unsafe-inline"), "{csp}");
        }
        let missing = named_asset(Path("../panel.rs".to_owned())).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn the_page_loads_every_asset_from_this_server_only() {
        assert!(!HTML.contains("http://") && !HTML.contains("https://"));
        for (name, content_type, _) in ASSETS {
            let tag = if *content_type == JS {
                format!(r#"<script src="/assets/{name}" defer>"#)
            } else {
                format!(r#"<link rel="stylesheet" href="/assets/{name}">"#)
            };
            assert!(
                HTML.contains(&tag),
                "panel.html does not load {name}: {tag}"
            );
        }
    }

    #[test]
    fn our_scripts_never_parse_markup() {
        // Model text becomes text nodes, markdown becomes elements created one token at a
        // time (docs/panel.md, "Safety"); only the vendored bundle is exempt.
        let ours = ASSETS
            .iter()
            .filter(|(name, content_type, _)| *content_type == JS && !name.starts_with("vendor/"));
        for (name, _, script) in ours {
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
