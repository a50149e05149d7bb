//! The twelve recorded provider streams through the decoder: whole, split at every byte
//! position, split at random with a fixed seed, and with CRLF and CR line endings. One test
//! module per fixture, so a failure names the provider.

use std::convert::Infallible;

use futures_util::stream;
use rojos_llm::{decode_stream, DecodeOptions};

use crate::support::expect::{check, drain, fixture, Outcome};

/// Decodes `bytes` delivered as the given pieces.
async fn decode(pieces: Vec<Vec<u8>>) -> Outcome {
    let body = stream::iter(pieces.into_iter().map(Ok::<_, Infallible>));
    drain(decode_stream(body, DecodeOptions::default())).await
}

fn with_line_ending(bytes: &[u8], ending: &str) -> Vec<u8> {
    let text = std::str::from_utf8(bytes).expect("fixtures are UTF-8");
    text.replace('\n', ending).into_bytes()
}

/// Split positions: every one for bodies up to 4 KiB; for larger ones every one in the first
/// and last 512 bytes and every 17th between (each split decodes the whole body, so every
/// position would cost the square of its length, and the middle events repeat the shapes
/// of the first ones).
fn split_positions(len: usize) -> Vec<usize> {
    if len <= 4096 {
        return (0..=len).collect();
    }
    (0..=len)
        .filter(|at| *at < 512 || *at > len - 512 || at % 17 == 0)
        .collect()
}

/// Two-piece splits (see `split_positions`) and the one-byte-at-a-time split of the
/// fixture in `ending`.
async fn every_split(name: &str, ending: &str, label: &str) {
    let bytes = with_line_ending(&fixture(name), ending);
    for at in split_positions(bytes.len()) {
        let got = decode(vec![bytes[..at].to_vec(), bytes[at..].to_vec()]).await;
        check(name, &format!("{label}, split at byte {at}"), &got);
    }
    let got = decode(bytes.iter().map(|b| vec![*b]).collect()).await;
    check(name, &format!("{label}, one byte at a time"), &got);
}

/// Many random splits into pieces of 1..=48 bytes, from a fixed seed.
async fn random_splits(name: &str) {
    let mut rng = fastrand::Rng::with_seed(0x5EED_0F12);
    for ending in ["\n", "\r\n", "\r"] {
        let bytes = with_line_ending(&fixture(name), ending);
        for round in 0..40 {
            let mut pieces = Vec::new();
            let mut at = 0;
            while at < bytes.len() {
                let end = (at + rng.usize(1..=48)).min(bytes.len());
                pieces.push(bytes[at..end].to_vec());
                at = end;
            }
            let got = decode(pieces).await;
            check(
                name,
                &format!("{ending:?} random split round {round}"),
                &got,
            );
        }
    }
}

macro_rules! fixture_tests {
    ($($module:ident => $file:literal),+ $(,)?) => {$(
        mod $module {
            use super::*;

            #[tokio::test]
            async fn whole_body_matches_the_table() {
                check($file, "whole", &decode(vec![fixture($file)]).await);
            }

            #[tokio::test]
            async fn every_split_with_lf() {
                every_split($file, "\n", "LF").await;
            }

            #[tokio::test]
            async fn every_split_with_crlf() {
                every_split($file, "\r\n", "CRLF").await;
            }

            #[tokio::test]
            async fn every_split_with_cr() {
                every_split($file, "\r", "CR").await;
            }

            #[tokio::test]
            async fn random_splits_in_every_line_ending() {
                random_splits($file).await;
            }
        }
    )+};
}

fixture_tests! {
    openai_single_call => "openai-single-call.sse",
    openai_parallel_calls => "openai-parallel-calls.sse",
    openai_text_reply => "openai-text-reply.sse",
    openai_usage_chunk => "openai-usage-chunk.sse",
    midstream_error => "midstream-error.sse",
    gemini_compat_call => "gemini-compat-call.sse",
    mistral_call => "mistral-call.sse",
    ollama_call => "ollama-call.sse",
    lmstudio_call => "lmstudio-call.sse",
    llamacpp_call => "llamacpp-call.sse",
    openrouter_keepalive_comments => "openrouter-keepalive-comments.sse",
    no_arg_call => "no-arg-call.sse",
}

/// The table covers exactly the fixtures on disk.
#[test]
fn every_fixture_on_disk_is_in_the_table() {
    let mut on_disk: Vec<String> = std::fs::read_dir(crate::support::expect::fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sse"))
        .collect();
    on_disk.sort();
    let table: serde_json::Value = serde_json::from_slice(&fixture("expected.json")).unwrap();
    let mut cased: Vec<String> = table["cases"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    cased.sort();
    assert_eq!(on_disk, cased);
}
