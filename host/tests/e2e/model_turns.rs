//! A model turn holds memory in proportion to what is kept, whatever the provider sends: a
//! 60 MB `data:` line is refused once it passes the event cap (twice `[limits]
//! max_model_turn_bytes` plus 64 KiB), and a turn whose text passes `max_model_turn_bytes`
//! ends there. Either way the chat ends with `ERROR` naming the limit and `DONE`
//! `provider_error`, a small stored conversation, and a server that serves the next chat.

use std::time::Duration;

use crate::support::{
    demo_message as message,
    host::{stored_bytes, HostConfig, TestHost},
    ndjson::Stream,
    upstream::{ScriptedUpstream, Turn},
};

/// A further chat on the same host is answered normally.
async fn next_chat_is_served(host: &TestHost, upstream: &ScriptedUpstream) {
    upstream.push([Turn::text("still here")]);
    let next = Stream::read(host.chat(message("again")).await).await;
    assert_eq!(next.text(), "still here");
    assert_eq!(next.done().1, "completed");
    upstream.assert_consumed();
}

#[tokio::test]
async fn a_60_mb_data_line_ends_the_chat_at_the_event_cap_and_the_server_goes_on() {
    let upstream = ScriptedUpstream::start(vec![Turn::huge_line(60_000_000)]).await;
    let host = TestHost::start(HostConfig::builtins().upstream(&upstream)).await;

    let stream = Stream::read(host.chat(message("write a lot")).await).await;
    assert_eq!(
        stream.text(),
        "",
        "no text of the refused line reaches the client"
    );
    let errors = stream.errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("the model's turn exceeded 2097152 bytes: the provider at ")
            && errors[0].contains("sent one stream event over 4259840 bytes; ask for a shorter"),
        "{errors:?}"
    );
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "provider_error");
    assert_eq!(
        upstream.received().len(),
        1,
        "a too-large turn is not retried"
    );

    let messages = host.stored_messages(&conversation).await;
    let size = stored_bytes(&messages);
    assert_eq!(
        messages.len(),
        2,
        "user message and its closing assistant message"
    );
    assert_eq!(messages[1]["role"], "assistant");
    assert!(size < 4096, "stored conversation of {size} bytes");

    // The host dropped the connection instead of reading the rest of the line.
    for _ in 0..200 {
        if upstream.dropped() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(upstream.dropped(), 1, "the upstream response was abandoned");
    let sent = upstream.huge_bytes_sent();
    assert!(
        sent < 32_000_000,
        "{sent} bytes written: only the cap and socket buffers"
    );

    next_chat_is_served(&host, &upstream).await;
}

#[tokio::test]
async fn text_past_max_model_turn_bytes_ends_the_chat_with_the_partial_text_within_it() {
    let upstream = ScriptedUpstream::start(vec![Turn::text(&"0123456789".repeat(3000))]).await;
    let host = TestHost::start(
        HostConfig::builtins()
            .upstream(&upstream)
            .with("[limits]\nmax_model_turn_bytes = 8192"),
    )
    .await;

    let stream = Stream::read(host.chat(message("write a lot")).await).await;
    let text = stream.text();
    assert!(
        !text.is_empty() && text.len() <= 8192,
        "partial text of {} bytes",
        text.len()
    );
    assert!(text.starts_with("0123456789"));
    assert_eq!(
        stream.errors(),
        [
            "the model's turn exceeded 8192 bytes of text and tool calls; ask for a shorter \
          answer or for the work in smaller steps, or raise the limit"
        ]
    );
    let (conversation, stop) = stream.done();
    assert_eq!(stop, "provider_error");
    assert_eq!(upstream.received().len(), 1);

    let messages = host.stored_messages(&conversation).await;
    let size = stored_bytes(&messages);
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[1]["content"],
        text.as_str(),
        "the partial text is kept"
    );
    assert!(size < 8192 + 2048, "stored conversation of {size} bytes");

    next_chat_is_served(&host, &upstream).await;
}
