//! `POST /conversations/{id}/approvals/{approvalId}` `{"decision": "approve" |
//! "approve_always" | "deny", "reason": "…"}`: the user's answer to an `APPROVAL_REQUIRED`
//! event, for a caller allowed on the conversation's project. The path names the event's
//! `approvalId`, or (clients written before approval ids) its call id when the model gave
//! that id to only one call of the conversation. It goes through the conversation store, so
//! it works whichever host it reaches (`docs/api.md`, "Approvals").

use axum::{
    extract::{rejection::JsonRejection, Path, State},
    Json,
};
use rojos_agent::DecideError;
use rojos_conversations::{ConversationId, Decision, DENY_REASON_MAX_CHARS};
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    auth::Caller,
    error::ApiError,
    stored::{internal, owned_head},
};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DecisionBody {
    decision: String,
    reason: Option<String>,
}

/// The decision a body names, or what is wrong with it.
fn decision_of(body: DecisionBody) -> Result<Decision, ApiError> {
    let bad = |text: String| Err(ApiError::BadRequest(text));
    let reason = body
        .reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty());
    match (body.decision.as_str(), reason) {
        ("approve", None) => Ok(Decision::Approve),
        ("approve_always", None) => Ok(Decision::ApproveAlways),
        ("approve" | "approve_always", Some(_)) => {
            bad("a reason goes only with \"deny\"; leave it out to approve".to_owned())
        }
        ("deny", reason) => {
            if let Some(r) = &reason {
                let chars = r.chars().count();
                if chars > DENY_REASON_MAX_CHARS {
                    return bad(format!(
                        "the reason is {chars} characters long, over the limit of \
                         {DENY_REASON_MAX_CHARS}; shorten it"
                    ));
                }
                if r.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
                    return bad("the reason contains control characters; remove them".to_owned());
                }
            }
            Ok(Decision::Deny { reason })
        }
        (other, _) => bad(format!(
            "unknown decision {other:?}: send \"approve\", \"approve_always\" or \"deny\""
        )),
    }
}

pub(super) async fn decide(
    caller: Caller,
    State(state): State<AppState>,
    Path((id, key)): Path<(String, String)>,
    body: Result<Json<DecisionBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let id = ConversationId::parse(&id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    // Any length: a call id is the model's, and the request's size is bounded by the
    // server's limits on a request line.
    if key.is_empty() {
        return Err(ApiError::BadRequest(
            "the path must end in the approvalId of an APPROVAL_REQUIRED event".to_owned(),
        ));
    }
    let Json(body) = body.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let decision = decision_of(body)?;
    owned_head(&caller, &state, &id).await?;
    let decided = match state.agent.approvals.decide(&id, &key, &decision).await {
        Ok(decided) => decided,
        Err(e @ (DecideError::NotPending(_) | DecideError::Ambiguous)) => {
            return Err(ApiError::Conflict(format!(
                "{} is not waiting for approval: {e}",
                shown(&key)
            )));
        }
        Err(DecideError::Store(e)) => return Err(internal(e)),
    };
    let mut answer = json!({
        "approvalId": decided.approval_id,
        "callId": decided.call_id,
        "decision": decision.as_str(),
    });
    if let Decision::Deny {
        reason: Some(reason),
    } = &decision
    {
        answer["reason"] = Value::from(reason.as_str());
    }
    Ok(Json(answer))
}

/// The approval id or call id a `409` names: quoted, cut after 80 characters (a model's
/// call id may be of any length).
fn shown(key: &str) -> String {
    const SHOWN_CHARS: usize = 80;
    let mut chars = key.chars();
    let head: String = chars.by_ref().take(SHOWN_CHARS).collect();
    if chars.next().is_some() {
        format!("call {head:?}… ({} characters)", key.chars().count())
    } else {
        format!("call {head:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(decision: &str, reason: Option<&str>) -> DecisionBody {
        DecisionBody {
            decision: decision.to_owned(),
            reason: reason.map(str::to_owned),
        }
    }

    #[test]
    fn bodies_become_decisions_or_say_what_is_wrong() {
        assert_eq!(
            decision_of(body("approve", None)).unwrap(),
            Decision::Approve
        );
        assert_eq!(
            decision_of(body("deny", Some("  not that file "))).unwrap(),
            Decision::Deny {
                reason: Some("not that file".into())
            }
        );
        assert_eq!(
            decision_of(body("deny", Some("   "))).unwrap(),
            Decision::Deny { reason: None }
        );
        let wrong = |b| decision_of(b).unwrap_err().to_string();
        assert!(wrong(body("approve", Some("x"))).contains("only with \"deny\""));
        assert!(wrong(body("yes", None)).contains("unknown decision \"yes\""));
        let long = "x".repeat(DENY_REASON_MAX_CHARS + 1);
        assert!(wrong(body("deny", Some(&long))).contains("over the limit"));
    }
}
