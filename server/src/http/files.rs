//! The project's files for the chat panel's files pane (docs/api.md, "Project files"):
//!
//! - `GET /projects/{id}/files?path=DIR`: one folder's entries, folders first;
//! - `GET /projects/{id}/files/content?path=FILE`: a file's text, or a note saying why it is
//!   not shown as text; with `download=1` its bytes as an attachment;
//! - `PUT /projects/{id}/files/content?path=FILE`: an upload, never replacing a file unless
//!   `overwrite=1`.
//!
//! Uploads and downloads stream (`upload`, `download`): each holds one buffer at a time, an
//! upload's body has a time limit, and `super::transfers` caps how many run at once
//! (docs/configuration.md, "Transfers").
//!
//! Every path goes through `rojos-fs-guard`'s [`ProjectDir`], the same confinement and
//! refusal messages as the file tools (docs/security.md, "Tools cannot leave the project"):
//! nothing here checks a path itself. File system work runs on the blocking pool.

use axum::{
    body::Body,
    extract::{rejection::QueryRejection, Path, Query, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use rojos_fs_guard::{check_path, EntryType, IfExists, PathError, PathUse, ProjectDir};
use rojos_plugin_api::{ErrorKind, Limits};
use serde::{Deserialize, Serialize};
use serde_json::json;

mod download;
mod upload;

use super::{auth::Caller, error::ApiError};
use crate::state::AppState;
use rojos_project_storage::ProjectId;

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    /// The folder, relative to the project root; `.` when absent.
    path: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ContentQuery {
    /// The file, relative to the project root.
    path: Option<String>,
    /// `1`: the raw bytes as an attachment instead of the text view.
    download: Option<u8>,
    /// `1`: an upload may replace an existing file.
    overwrite: Option<u8>,
}

/// One entry of a listed folder.
#[derive(Debug, Serialize)]
pub(super) struct FileEntry {
    name: String,
    #[serde(rename = "type")]
    kind: EntryType,
    /// The entry is a symbolic link (to something inside the project).
    symlink: bool,
    size: u64,
    #[serde(rename = "modifiedAt")]
    modified_at: String,
}

/// `GET /projects/{id}/files`'s answer.
#[derive(Debug, Serialize)]
pub(super) struct FolderListing {
    path: String,
    entries: Vec<FileEntry>,
    /// Entries were left out (over `[limits] max_list_entries`).
    truncated: bool,
    /// How many entries the folder has that could be listed.
    total: usize,
    /// How many of them were left out: a cut listing keeps its folders first, then the
    /// first files.
    omitted: usize,
}

pub(super) async fn list(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let project = authorized_project(&caller, &id)?;
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let path = query.path.unwrap_or_else(|| ".".to_owned());
    check_path(&path, PathUse::Existing).map_err(refusal)?;
    let limits = state.agent.limits;
    let listing = blocking("listing a project folder", move || {
        let Some(root) = state
            .storage
            .existing_project_root(&project)
            .map_err(|e| ApiError::internal("opening the project folder", e))?
        else {
            // No file was ever written in this project: its root is empty, nothing else
            // exists (docs/api.md: a missing project folder lists as empty).
            return if is_root(&path) {
                Ok(FolderListing {
                    path,
                    entries: Vec::new(),
                    truncated: false,
                    total: 0,
                    omitted: 0,
                })
            } else {
                Err(refusal(PathError::NotFound {
                    path: rojos_fs_guard::Shown::new(&path),
                }))
            };
        };
        let dir = ProjectDir::new(root, limits);
        let listing = dir.list(&path).map_err(refusal)?;
        let entries: Vec<FileEntry> = listing
            .entries
            .iter()
            .filter_map(|entry| {
                // An entry removed since it was listed is left out, as if listed a moment
                // later.
                let meta = dir.meta(&child(&path, &entry.name)).ok()?;
                Some(FileEntry {
                    name: entry.name.clone(),
                    kind: entry.kind,
                    symlink: entry.symlink,
                    size: meta.size,
                    modified_at: meta.modified_at,
                })
            })
            .collect();
        // fs-guard lists folders first, then files, each group by name, and a cut listing
        // keeps the folders first; an entry removed meanwhile only shortens it.
        Ok(FolderListing {
            path,
            entries,
            truncated: listing.truncated(),
            total: listing.total,
            omitted: listing.total.saturating_sub(listing.entries.len()),
        })
    })
    .await?;
    shown_json(&listing)
}

/// `value` as a JSON answer whose invisible characters (in names made outside Rojos) are
/// JSON escapes: the same value for the panel, nothing invisible for a person reading it
/// (docs/security.md, "Invisible characters in names").
fn shown_json(value: &impl Serialize) -> Result<Response, ApiError> {
    let text = serde_json::to_string(value).map_err(|e| ApiError::internal("answering", e))?;
    let text = rojos_fs_guard::json_escaped(&text).into_owned();
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        text,
    )
        .into_response())
}

pub(super) async fn content(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<ContentQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let project = authorized_project(&caller, &id)?;
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let path = required_path(query.path)?;
    let download = flag("download", query.download)?;
    // The text view reads as `get_text_content` does (the tools' `max_read_bytes`); a
    // download is bounded by `max_upload_bytes`, the transfer limit of both directions.
    let limits = if download {
        Limits {
            max_read_bytes: state.config.max_upload_bytes as u64,
            ..state.agent.limits
        }
    } else {
        state.agent.limits
    };
    let permit = if download {
        Some(state.transfers.admit(caller.token(), &state.metrics)?)
    } else {
        None
    };
    blocking("reading a project file", move || {
        let root = state
            .storage
            .existing_project_root(&project)
            .map_err(|e| ApiError::internal("opening the project folder", e))?;
        let Some(root) = root else {
            check_path(&path, PathUse::Existing).map_err(refusal)?;
            return Err(refusal(PathError::NotFound {
                path: rojos_fs_guard::Shown::new(&path),
            }));
        };
        let dir = ProjectDir::new(root, limits);
        if let Some(permit) = permit {
            let opened = dir.open_file(&path).map_err(refusal)?;
            return Ok(attachment(&path, download::body(opened, permit)));
        }
        let meta = dir.meta(&path).map_err(refusal)?;
        let shown = |field: &str, value: String| {
            json!({
                "path": path,
                "size": meta.size,
                "modifiedAt": meta.modified_at,
                field: value,
            })
        };
        let body = match dir.read_text(&path) {
            Ok(text) => shown("text", text),
            Err(e) if e.kind() == ErrorKind::NOT_TEXT || e.kind() == ErrorKind::TOO_LARGE => {
                let reason = if e.kind() == ErrorKind::NOT_TEXT {
                    "notText"
                } else {
                    "tooLarge"
                };
                let mut body = shown("note", format!("{e}; download it to open it elsewhere"));
                body["reason"] = json!(reason);
                body
            }
            Err(e) => return Err(refusal(e)),
        };
        Ok(Json(body).into_response())
    })
    .await
}

pub(super) async fn upload(
    caller: Caller,
    State(state): State<AppState>,
    Path(id): Path<String>,
    query: Result<Query<ContentQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let project = authorized_project(&caller, &id)?;
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let path = required_path(query.path)?;
    let if_exists = if flag("overwrite", query.overwrite)? {
        IfExists::Replace
    } else {
        IfExists::Refuse
    };
    // Refused before a byte of a large body is read or anything is created.
    check_path(&path, PathUse::Create).map_err(refusal)?;
    let limit = state.config.max_upload_bytes;
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    let _permit = state.transfers.admit(caller.token(), &state.metrics)?;
    // The whole body must have arrived by then, however it trickles in.
    let deadline = tokio::time::Instant::now() + state.config.transfers.body_timeout;
    let limits = Limits {
        max_write_bytes: limit as u64,
        ..state.agent.limits
    };
    let storage = std::sync::Arc::clone(&state.storage);
    let staged_path = path.clone();
    let staged_project = project.clone();
    let staged = blocking("starting an upload", move || {
        let root = storage
            .project_root(&staged_project)
            .map_err(|e| ApiError::internal("opening the project folder", e))?;
        ProjectDir::new(root, limits)
            .stage_write(&staged_path, if_exists)
            .map_err(upload_refusal)
    })
    .await?;
    let staged = upload::receive(staged, body, deadline, state.config.transfers.body_timeout)
        .await
        .map_err(|e| match e {
            upload::Failed::Refused(e) => upload_refusal(e),
            other => other.into(),
        })?;
    let size = staged.written();
    blocking("writing a project file", move || {
        // Everything has arrived: the file takes its name now, in one rename, under a share
        // of the project lock, so an undo does not check and restore the project meanwhile
        // (docs/security.md, "Undo holds the project's lock").
        let _change = (state.agent.checkpoints.hold_for_change(&project))
            .map_err(|e| ApiError::internal("taking the project lock", e))?;
        let written = staged.commit().map_err(upload_refusal)?;
        let status = if written.replaced {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        let answer = json!({ "path": path, "size": size, "replaced": written.replaced });
        Ok((status, Json(answer)).into_response())
    })
    .await
}

/// An upload's refusal: `409` for a file at the name (with what to do), else as [`refusal`].
fn upload_refusal(error: PathError) -> ApiError {
    match error {
        PathError::AlreadyExists { .. } => ApiError::Conflict(format!(
            "{error}: upload with overwrite=1 to replace it, or choose another name"
        )),
        PathError::TextTooLarge { limit, .. } => too_large(limit as usize),
        other => refusal(other),
    }
}

/// The refusal of an upload over `max_upload_bytes`.
fn too_large(limit: usize) -> ApiError {
    ApiError::TooLarge(format!(
        "the file is over the upload limit of {limit} bytes ([limits] max_upload_bytes)"
    ))
}

/// The project `id`, checked for shape (`400`) and for the caller's scope (`403`).
fn authorized_project(caller: &Caller, id: &str) -> Result<ProjectId, ApiError> {
    let project = ProjectId::parse(id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    caller.authorize(&project)?;
    Ok(project)
}

fn required_path(path: Option<String>) -> Result<String, ApiError> {
    path.ok_or_else(|| {
        ApiError::BadRequest(
            "path is missing: give the file's path relative to the project root, such as \
             ?path=docs/notes.md"
                .to_owned(),
        )
    })
}

/// A `0`/`1` query flag.
fn flag(name: &str, value: Option<u8>) -> Result<bool, ApiError> {
    match value {
        None | Some(0) => Ok(false),
        Some(1) => Ok(true),
        Some(_) => Err(ApiError::BadRequest(format!("{name} must be 0 or 1"))),
    }
}

/// A fs-guard refusal as the answer, with fs-guard's own message: `404` for a missing name,
/// `413` over a limit, `500` (logged) for an I/O failure, `400` for the rest (a malformed or
/// hostile path, a folder where a file was needed, a link that leads out).
fn refusal(error: PathError) -> ApiError {
    let kind = error.kind();
    if kind == ErrorKind::NOT_FOUND {
        ApiError::NotFound(error.to_string())
    } else if kind == ErrorKind::TOO_LARGE {
        ApiError::TooLarge(error.to_string())
    } else if kind == ErrorKind::IO {
        ApiError::internal("project file access", error)
    } else {
        ApiError::BadRequest(error.to_string())
    }
}

/// Whether `path` (already checked) names the project root: only `.` and empty parts.
fn is_root(path: &str) -> bool {
    path.split('/').all(|part| part.is_empty() || part == ".")
}

/// The path of `name` in the folder `folder`, as the pane shows it (`a/b`, not `./a/b`).
fn child(folder: &str, name: &str) -> String {
    if is_root(folder) {
        name.to_owned()
    } else {
        format!("{}/{name}", folder.trim_end_matches('/'))
    }
}

/// The bytes of `path` as a download: `application/octet-stream`, never rendered by the
/// browser, named by its last part (RFC 6266: an ASCII `filename` and the UTF-8 `filename*`),
/// with its invisible characters written as `\u{XXXX}` (as the files pane shows them), so a
/// bidirectional override cannot make the saved name read as another.
fn attachment(path: &str, body: Body) -> Response {
    let name = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("download");
    let name = rojos_fs_guard::escaped(name);
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ' ') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let encoded: String = name
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let disposition = format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}");
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Runs `work` on the blocking pool (file system calls block).
async fn blocking<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::internal(what, e))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_download_name_is_plain_ascii_with_the_name_encoded_beside_it() {
        let response = attachment("docs/ré\"sumé;\r\n.txt", Body::from("x"));
        let value = response.headers()[header::CONTENT_DISPOSITION]
            .to_str()
            .expect("ASCII header");
        assert_eq!(
            value,
            "attachment; filename=\"r__sum___u_000d__u_000a_.txt\"; \
             filename*=UTF-8''r%C3%A9%22sum%C3%A9%3B%5Cu%7B000d%7D%5Cu%7B000a%7D.txt"
        );
    }

    #[test]
    fn a_download_name_shows_its_invisible_characters_escaped() {
        let response = attachment("docs/invoice\u{202e}txt.exe", Body::from("x"));
        let value = response.headers()[header::CONTENT_DISPOSITION]
            .to_str()
            .expect("ASCII header");
        assert_eq!(
            value,
            "attachment; filename=\"invoice_u_202e_txt.exe\"; \
             filename*=UTF-8''invoice%5Cu%7B202e%7Dtxt.exe"
        );
    }

    #[test]
    fn child_paths_of_the_root_have_no_dot_prefix() {
        assert_eq!(child(".", "a"), "a");
        assert_eq!(child("./", "a"), "a");
        assert_eq!(child("docs/", "a"), "docs/a");
        assert_eq!(child("docs", "a"), "docs/a");
    }
}
