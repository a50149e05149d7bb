//! The SQLite search (`crate::search`, schema version 6): the conversations whose title or
//! message text holds a searched text, each with the snippet of its first matching message
//! (`crate::snippet`).

use rusqlite::{params, Connection};

use super::queries::{project_docs, sql_limit, summary_of, SummaryRow, SUMMARY_COLUMNS};
use crate::error::StoreError;
use crate::search::{search_text_of_json, SearchPattern};
use crate::snippet::Snippet;
use crate::store::SearchHit;

/// A raw row of a search: the summary's columns, then the index and JSON text of the first
/// matching message (`NULL` when only the title matched).
type HitRow = (SummaryRow, Option<i64>, Option<String>);

/// Up to `limit` conversations of `project_id` whose title, or the searchable text of one of
/// whose messages (`crate::search`), contains the searched text ignoring case, most recent
/// activity first. Titles are compared through `rojos_fold` with `LIKE`; messages are looked
/// up in the search index by the text's trigrams, within the project's documents, and each
/// candidate's text is then checked (`rojos_search_match`, linear in its size). A text too
/// short for a trigram searches titles only. The first matching message of each hit kept is
/// read once more, for its snippet.
pub(crate) fn search(
    conn: &mut Connection,
    project_id: &str,
    pattern: &SearchPattern,
    limit: usize,
) -> Result<Vec<SearchHit>, StoreError> {
    let action = || format!("search the conversations of project '{project_id}'");
    let docs = project_docs(conn, project_id).map_err(|e| StoreError::backend(action(), e))?;
    let like = pattern.like_folded();
    let limit = sql_limit(limit);
    let rows = match (pattern.fts_query(), docs) {
        (Some(trigrams), Some((first, last))) => {
            // The hits are chosen and ordered first; only the kept ones' messages are read.
            let sql = format!(
                "WITH hits AS (
                     SELECT d.conversation_id AS conversation_id, min(d.seq) AS seq
                     FROM search_trigrams t
                     JOIN search_docs d ON d.doc = t.rowid
                     JOIN messages m ON m.conversation_id = d.conversation_id
                                    AND m.seq = d.seq
                     WHERE search_trigrams MATCH ?4 AND t.rowid BETWEEN ?5 AND ?6
                     AND rojos_search_match(m.json, ?7)
                     GROUP BY d.conversation_id
                 ),
                 kept AS (
                     SELECT {SUMMARY_COLUMNS}, activity, h.seq AS hit_seq
                     FROM conversations c LEFT JOIN hits h ON h.conversation_id = c.id
                     WHERE c.project_id = ?1 AND (
                         rojos_fold(coalesce(custom_title, title)) LIKE ?2 ESCAPE '\\'
                         OR h.seq IS NOT NULL
                     )
                     ORDER BY activity DESC LIMIT ?3
                 )
                 SELECT kept.*, (SELECT json FROM messages
                                 WHERE conversation_id = kept.id AND seq = kept.hit_seq)
                 FROM kept ORDER BY activity DESC"
            );
            let folded = pattern.folded();
            let params = params![project_id, like, limit, trigrams, first, last, folded];
            rows(conn, &sql, params, true)
        }
        _ => {
            let sql = format!(
                "SELECT {SUMMARY_COLUMNS} FROM conversations
                 WHERE project_id = ?1
                 AND rojos_fold(coalesce(custom_title, title)) LIKE ?2 ESCAPE '\\'
                 ORDER BY activity DESC LIMIT ?3"
            );
            rows(conn, &sql, params![project_id, like, limit], false)
        }
    }
    .map_err(|e| StoreError::backend(action(), e))?;
    rows.into_iter()
        .map(|(summary, seq, json)| {
            let snippet = seq.zip(json).and_then(|(seq, json)| {
                let text = search_text_of_json(&json)?;
                Snippet::of(u64::try_from(seq).ok()?, &text, pattern.folded())
            });
            Ok(SearchHit {
                conversation: summary_of(summary, project_id)?,
                snippet,
            })
        })
        .collect()
}

/// The rows `sql` selects: the summary's six columns, and with `with_hit` the activity
/// (skipped), the hit's index and its message's JSON.
fn rows(
    conn: &mut Connection,
    sql: &str,
    params: impl rusqlite::Params,
    with_hit: bool,
) -> rusqlite::Result<Vec<HitRow>> {
    let mut select = conn.prepare_cached(sql)?;
    let rows = select.query_map(params, |row| {
        let summary = (
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
            row.get(5)?,
        );
        if with_hit {
            Ok((summary, row.get(7)?, row.get(8)?))
        } else {
            Ok((summary, None, None))
        }
    })?;
    rows.collect()
}
