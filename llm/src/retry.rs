//! When a failed attempt may be tried again and how long to wait: retryable statuses,
//! quota errors, `Retry-After` / `retry-after-ms`, exponential backoff with jitter.
//! Pure functions; the attempt loop is in `client/run.rs`.

use std::time::Duration;

use reqwest::header::HeaderMap;

use crate::error::LlmError;
use crate::wire::ErrorInfo;

/// When and how often a failed request is tried again. Retries happen only before anything
/// was yielded to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts, the first included (1 = never retry).
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles each time, with jitter.
    pub base_backoff: Duration,
    /// Upper bound of the computed backoff.
    pub max_backoff: Duration,
    /// Upper bound of a provider's `Retry-After` / `retry-after-ms`.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

/// 408, 409, 429 and every 5xx (529 is Anthropic's "overloaded") are worth another try.
pub(crate) fn status_is_retryable(code: u16) -> bool {
    matches!(code, 408 | 409 | 429 | 500..=599)
}

/// Error codes that mean "wait for the billing page, not for a retry".
pub(crate) fn is_quota_error(info: &ErrorInfo) -> bool {
    info.tags.iter().any(|t| is_quota_code(t))
}

/// One provider error code that means "out of quota or credit".
pub(crate) fn is_quota_code(code: &str) -> bool {
    matches!(
        code.to_ascii_lowercase().as_str(),
        "insufficient_quota"
            | "quota_exceeded"
            | "billing_hard_limit_reached"
            | "billing_not_active"
    )
}

/// In-stream errors that are transient on the provider's side.
pub(crate) fn is_transient_provider_error(code: Option<&str>) -> bool {
    code.is_some_and(|c| {
        matches!(
            c.to_ascii_lowercase().as_str(),
            "api_error"
                | "overloaded_error"
                | "overloaded"
                | "server_error"
                | "internal_error"
                | "internal_server_error"
                | "service_unavailable"
                | "unavailable"
                | "rate_limit_error"
                | "rate_limit_exceeded"
                | "timeout"
                | "429"
                | "500"
                | "502"
                | "503"
                | "504"
                | "529"
        )
    })
}

/// Whether a failure after HTTP 200 but before any output may be retried.
pub(crate) fn in_stream_error_is_retryable(error: &LlmError) -> bool {
    match error {
        // Nothing usable came: often a proxy's hiccup, and nothing reached the user yet.
        LlmError::StreamCut { .. } | LlmError::EmptyTurn { .. } => true,
        LlmError::Provider { code, .. } => is_transient_provider_error(code.as_deref()),
        _ => false,
    }
}

/// The provider's requested wait (`retry-after-ms`, else `Retry-After` in seconds), capped.
/// An HTTP-date `Retry-After` is ignored (backoff applies).
pub(crate) fn retry_after(headers: &HeaderMap, cap: Duration) -> Option<Duration> {
    let read = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let wait = read("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| read("retry-after"))?;
    Some(Duration::from_secs_f64(wait.min(cap.as_secs_f64())))
}

/// `x-should-retry: false` (OpenAI, Anthropic) vetoes a retry.
pub(crate) fn provider_vetoes_retry(headers: &HeaderMap) -> bool {
    headers
        .get("x-should-retry")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
}

/// Backoff after the `failed`-th attempt (1-based): `base * 2^(failed-1)`, capped, then
/// jittered into its upper half so that clients spread out.
pub(crate) fn backoff(policy: &RetryPolicy, failed: u32, jitter: f64) -> Duration {
    let factor = 2f64.powi(failed.saturating_sub(1).min(30) as i32);
    let full = (policy.base_backoff.as_secs_f64() * factor).min(policy.max_backoff.as_secs_f64());
    Duration::from_secs_f64(full * (0.5 + 0.5 * jitter.clamp(0.0, 1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn retryable_statuses_are_exactly_the_transient_ones() {
        for code in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(status_is_retryable(code), "{code}");
        }
        for code in [400, 401, 403, 404, 413, 422] {
            assert!(!status_is_retryable(code), "{code}");
        }
    }

    #[test]
    fn retry_after_prefers_milliseconds_and_is_capped() {
        let cap = Duration::from_secs(120);
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "250"), ("retry-after", "9")]),
                cap
            ),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")]), cap),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "3600")]), cap),
            Some(cap)
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
                cap
            ),
            None
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "-1")]), cap), None);
        assert_eq!(retry_after(&HeaderMap::new(), cap), None);
    }

    #[test]
    fn backoff_doubles_is_capped_and_jittered() {
        let p = RetryPolicy {
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..RetryPolicy::default()
        };
        assert_eq!(backoff(&p, 1, 1.0), Duration::from_millis(100));
        assert_eq!(backoff(&p, 2, 1.0), Duration::from_millis(200));
        assert_eq!(backoff(&p, 3, 1.0), Duration::from_millis(350));
        assert_eq!(backoff(&p, 1, 0.0), Duration::from_millis(50));
        assert_eq!(backoff(&p, 99, 0.0), Duration::from_millis(175));
    }

    #[test]
    fn quota_errors_and_vetoes_are_recognised() {
        let info = ErrorInfo {
            message: "You exceeded your current quota".into(),
            code: Some("insufficient_quota".into()),
            tags: vec!["insufficient_quota".into(), "insufficient_quota".into()],
        };
        assert!(is_quota_error(&info));
        assert!(provider_vetoes_retry(&headers(&[(
            "x-should-retry",
            "false"
        )])));
        assert!(!provider_vetoes_retry(&headers(&[(
            "x-should-retry",
            "true"
        )])));
        assert!(is_transient_provider_error(Some("api_error")));
        assert!(!is_transient_provider_error(Some("invalid_request_error")));
        assert!(!is_transient_provider_error(None));
    }
}
