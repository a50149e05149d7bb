//! Several hosts (docs/deploy.md): two `rojos` processes started with the same `rojos.toml`,
//! so with one PostgreSQL database and one storage folder, behind a real nginx running
//! `docs/nginx.conf`. The docs/intro conversation streams through nginx event by event;
//! its follow-ups land on alternating hosts and every host reads the same history; `/readyz`
//! answers through nginx. Two hosts writing one file at once leave one whole version.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rojos_conversations::test_cluster::PgCluster;
use serde_json::{json, Value};

use crate::support::{
    binary::RunningBinary,
    host::{chat_at, client, HostConfig, TOKEN},
    ndjson::{Event, Stream},
    nginx::Nginx,
    seed,
    upstream::{ScriptedUpstream, Turn},
};

/// The environment variable the tests' `[store]` names for the password.
const PASSWORD_VAR: &str = "ROJOS_E2E_PG_PASSWORD";

/// The PostgreSQL server of this module's tests (each uses its own database in it).
pub(crate) fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        PgCluster::start()
            .unwrap_or_else(|e| panic!("cannot start the test PostgreSQL server: {e}"))
    })
}

/// Two hosts on one config folder (one `rojos.toml`, one `storage/`), one database, and
/// nginx in front of them.
pub(crate) struct Deployment {
    /// The config folder; its `storage/` is the shared storage folder.
    pub(crate) dir: tempfile::TempDir,
    pub(crate) hosts: [RunningBinary; 2],
    /// Each host's own address, for what must bypass nginx.
    pub(crate) urls: [String; 2],
    pub(crate) nginx: Nginx,
}

impl Deployment {
    pub(crate) fn start(config: HostConfig) -> Deployment {
        Deployment::start_with_store(config, "")
    }

    /// [`Deployment::start`] with `store` (lines of keys) added to the `[store]` table.
    pub(crate) fn start_with_store(config: HostConfig, store: &str) -> Deployment {
        let cluster = cluster();
        let database = cluster.create_database().expect("a new database");
        let config = config.with(&format!(
            "[store]\nbackend = \"postgres\"\nurl = \"{}\"\npassword_env = \"{PASSWORD_VAR}\"\n{store}",
            cluster.url(&database)
        ));
        let dir = config.in_temp_folder();
        let password = cluster.password();
        let start = || RunningBinary::start(dir.path(), "info", &[(PASSWORD_VAR, &password)]);
        let hosts = [start(), start()];
        let urls = [hosts[0].url(), hosts[1].url()];
        let nginx = Nginx::start(&urls);
        Deployment {
            dir,
            hosts,
            urls,
            nginx,
        }
    }

    /// Kills host `n` (SIGKILL: nothing flushed, nothing handed over).
    pub(crate) fn kill(&mut self, n: usize) {
        self.hosts[n].kill();
    }

    /// Stops host `n` gracefully (SIGTERM) and waits for it to exit.
    pub(crate) fn terminate(&mut self, n: usize) -> std::process::ExitStatus {
        self.hosts[n].terminate()
    }

    /// Kills host `n` and starts it again on the same config folder (a new address, which
    /// `urls[n]` then holds; nginx keeps the old one).
    pub(crate) fn restart(&mut self, n: usize) {
        self.hosts[n].kill();
        let password = cluster().password();
        self.hosts[n] = RunningBinary::start(self.dir.path(), "info", &[(PASSWORD_VAR, &password)]);
        self.urls[n] = self.hosts[n].url();
    }

    /// A file of project `demo` on the shared storage folder.
    pub(crate) fn project_file(&self, path: &str) -> std::path::PathBuf {
        self.dir.path().join("storage/demo/root").join(path)
    }

    /// How many runs each host has finished, from its own log.
    fn runs_finished(&self) -> [usize; 2] {
        self.hosts.each_ref().map(|host| {
            host.stderr
                .lock()
                .expect("log lock")
                .matches("chat finished")
                .count()
        })
    }

    /// Each host's finished runs once `total` runs have finished over both; waits
    /// (generously) for the log lines, which may trail the end of the streams.
    fn runs_finished_when(&self, total: usize) -> [usize; 2] {
        for _ in 0..600 {
            let now = self.runs_finished();
            if now.iter().sum::<usize>() >= total {
                return now;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no host logged run {total}: {:?}", self.runs_finished());
    }

    /// Which host finished run number `total` (1-based, counted over both hosts), given the
    /// counts `before` it.
    fn host_of_run(&self, before: [usize; 2], total: usize) -> usize {
        let now = self.runs_finished_when(total);
        let served: Vec<usize> = (0..2).filter(|&i| now[i] > before[i]).collect();
        assert_eq!(served.len(), 1, "one host ran it: {before:?} -> {now:?}");
        served[0]
    }
}

/// `GET url/path` with the token: status and body.
async fn get(url: &str, path: &str) -> (u16, String) {
    let response = client()
        .get(format!("{url}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("answered");
    (
        response.status().as_u16(),
        response.text().await.expect("body"),
    )
}

/// Reads `response` until the `TOOL_RESULT` of call `id` has arrived whole, and returns the
/// body so far; panics after thirty seconds (a proxy holding the events back never gets there).
async fn read_until_result(response: &mut reqwest::Response, id: &str) -> String {
    let mut seen = String::new();
    let arrived = |seen: &str| {
        seen.lines().any(|line| {
            matches!(crate::support::ndjson::event_of_line(line), Some(Event::ToolResult { id: got, .. }) if got == id)
        })
    };
    let reading = async {
        while !arrived(&seen) {
            let chunk = response.chunk().await.expect("the stream goes on");
            let chunk = chunk.unwrap_or_else(|| panic!("the stream ended first: {seen}"));
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    if tokio::time::timeout(Duration::from_secs(30), reading)
        .await
        .is_err()
    {
        panic!("the TOOL_RESULT of {id} never came through while the run went on: {seen:?}");
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_behind_nginx_stream_events_live_and_share_the_conversation() {
    // The reference conversation's last turn (the answer) waits for the test: the events before it can only
    // have reached the client through nginx if nothing held them back.
    let mut turns = seed::turns();
    let answer = turns.pop().expect("the reference conversation's answer");
    turns.push(answer.held());
    turns.extend((1..=4).map(|n| Turn::text(&format!("answer {n}"))));
    let upstream = ScriptedUpstream::start(turns).await;
    // A provider that waits for the held answer longer than the test waits for the events.
    let patient = format!(
        "[providers.patient]\nbase_url = \"{}\"\nmodel = \"scripted-model\"\ncontext_tokens = 1000000\n\
         idle_timeout_secs = 120\n\n[rojos.default]\nprovider = \"patient\"\ntools = \"*\"\n",
        upstream.base_url
    );
    let deployment = Deployment::start(HostConfig::builtins().with(&patient));
    let nginx = &deployment.nginx.url;

    // As a browser asks: a proxy compressing the stream would hold events back.
    let mut response = client()
        .post(format!("{nginx}/chat"))
        .bearer_auth(TOKEN)
        .header("accept-encoding", "gzip")
        .json(&seed::body("demo"))
        .send()
        .await
        .expect("the chat request is answered");
    assert_eq!(response.status(), 200, "{}", deployment.nginx.error_log());
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let early = read_until_result(&mut response, "call_write").await;
    // The answer is held at the upstream: what was read came through while the run went on.
    upstream.until_received(3).await;
    assert!(!early.contains("\"DONE\""), "{early}");
    upstream.release();
    let rest = response.text().await.expect("the rest of the stream");
    let intro = Stream::parse(&format!("{early}{rest}"));
    assert_eq!(intro.text(), seed::ANSWER);
    assert!(intro.results().iter().all(|(_, ok, _)| *ok), "{intro:#?}");
    let (conversation, _) = intro.done();
    let page = std::fs::read_to_string(deployment.project_file("docs/intro/index.page"));
    assert_eq!(page.expect("the page on the shared storage"), seed::PAGE);

    let mut served = vec![deployment.host_of_run([0, 0], 1)];
    for n in 1..=4 {
        let before = deployment.runs_finished();
        let body = json!({"projectId": "demo", "conversationId": conversation, "message": format!("question {n}")});
        let reply = Stream::read(chat_at(nginx, &body).await).await;
        assert_eq!(reply.text(), format!("answer {n}"));
        served.push(deployment.host_of_run(before, n + 1));
    }
    assert!(
        served.windows(2).all(|pair| pair[0] != pair[1]),
        "nginx's round robin alternates hosts: {served:?}\n{}",
        deployment.nginx.access_log()
    );
    // Each follow-up's host sent the model the whole history, whichever host wrote it.
    let last = upstream.received().pop().expect("requests").body;
    let sent: Vec<&str> = last["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    for said in [
        seed::MESSAGE,
        seed::ANSWER,
        "question 3",
        "answer 3",
        "question 4",
    ] {
        assert!(sent.contains(&said), "{said:?} not in {sent:?}");
    }
    upstream.assert_consumed();

    let path = format!("/conversations/{conversation}?projectId=demo");
    let [first, second] = &deployment.urls;
    let history = get(first, &path).await;
    assert_eq!(history.0, 200, "{}", history.1);
    assert_eq!(history, get(second, &path).await);
    let contents: Vec<Value> = serde_json::from_str::<Value>(&history.1)
        .expect("JSON")
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user" || (m["role"] == "assistant" && m["content"].is_string()))
        .map(|m| m["content"].clone())
        .collect();
    let expected: Vec<Value> = [seed::MESSAGE, seed::ANSWER]
        .into_iter()
        .map(str::to_owned)
        .chain((1..=4).flat_map(|n| [format!("question {n}"), format!("answer {n}")]))
        .map(Value::from)
        .collect();
    assert_eq!(contents, expected);
    let list = "/conversations?projectId=demo";
    assert_eq!(get(first, list).await, get(second, list).await);

    for _ in 0..2 {
        assert_eq!(get(nginx, "/readyz").await, (200, "ready\n".to_owned()));
    }
}

/// `size` bytes of numbered lines, each naming `who`, so any mix of two is told apart.
fn version(who: &str, size: usize) -> String {
    let mut text = String::with_capacity(size + 64);
    let mut n = 0;
    while text.len() < size {
        n += 1;
        text.push_str(&format!("line {n:07} written by {who}\n"));
    }
    text
}

/// The texts `who` writes: `writes` versions of about `size` bytes (a repeated call would
/// not run again, so each write differs).
fn versions(who: &str, size: usize, writes: usize) -> Vec<String> {
    (1..=writes)
        .map(|n| version(&format!("{who}, write {n}"), size))
        .collect()
}

/// One model turn per text, each writing it to `path` (one call a turn), then an answer.
fn writing_turns(path: &str, texts: &[String]) -> Vec<Turn> {
    let write = |(n, text): (usize, &String)| {
        let arguments = json!({"path": path, "text": text}).to_string();
        Turn::deltas(
            &[
                json!({"role": "assistant", "content": null}),
                json!({"tool_calls": [{"index": 0, "id": format!("call_{n}"), "type": "function",
                    "function": {"name": "write_text_content", "arguments": arguments}}]}),
            ],
            "tool_calls",
        )
    };
    texts
        .iter()
        .enumerate()
        .map(write)
        .chain([Turn::text("written")])
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_writing_one_file_at_once_leave_one_whole_version() {
    const PATH: &str = "shared/notes.txt";
    const WRITES: usize = 5;
    let first_texts = versions("the first host", 256 * 1024, WRITES);
    let second_texts = versions("the second host", 240 * 1024, WRITES);
    // One rojos.toml, two rojos on two upstreams: `default` writes one host's versions,
    // `other` the other's.
    let first = ScriptedUpstream::start_by_step(writing_turns(PATH, &first_texts)).await;
    let second = ScriptedUpstream::start_by_step(writing_turns(PATH, &second_texts)).await;
    let config = HostConfig::builtins().upstream(&first).with(&format!(
        "[providers.other]\nbase_url = \"{}\"\nmodel = \"scripted-model\"\ncontext_tokens = 1000000\n\n\
         [rojos.other]\nprovider = \"other\"\ntools = \"*\"\n",
        second.base_url
    ));
    let deployment = Deployment::start(config);
    let file = deployment.project_file(PATH);

    // A reader on the shared storage all along: every read finds no file yet, or one whole
    // version.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = std::thread::spawn({
        let (stop, file) = (Arc::clone(&stop), file.clone());
        let wholes: Vec<String> = first_texts.iter().chain(&second_texts).cloned().collect();
        move || {
            let (mut whole_reads, mut other) = (0, Vec::new());
            while !stop.load(Ordering::SeqCst) {
                match std::fs::read_to_string(&file) {
                    Ok(text) if wholes.contains(&text) => whole_reads += 1,
                    Ok(text) => other.push(text.len()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => panic!("reading {}: {e}", file.display()),
                }
            }
            (whole_reads, other)
        }
    });
    let [host_a, host_b] = &deployment.urls;
    let (ran_a, ran_b) = tokio::join!(
        async {
            Stream::read(
                chat_at(host_a, &json!({"projectId": "demo", "message": "write it"})).await,
            )
            .await
        },
        async {
            Stream::read(
                chat_at(
                    host_b,
                    &json!({"projectId": "demo", "rojo": "other", "message": "write it"}),
                )
                .await,
            )
            .await
        },
    );
    stop.store(true, Ordering::SeqCst);
    let (whole_reads, other) = reader.join().expect("the reader ends");

    for ran in [&ran_a, &ran_b] {
        let results = ran.results();
        assert_eq!(results.len(), WRITES, "{:?} {:?}", ran.errors(), ran.done());
        assert!(results.iter().all(|(_, ok, _)| *ok), "{results:?}");
        assert_eq!(ran.text(), "written");
    }
    assert_eq!(
        deployment.runs_finished_when(2),
        [1, 1],
        "each host ran one"
    );
    assert!(
        other.is_empty(),
        "{} reads found no whole version; their sizes, first ten: {:?} (whole reads: \
         {whole_reads})",
        other.len(),
        &other[..other.len().min(10)]
    );
    assert!(whole_reads > 0, "the reader saw the file");
    let left = std::fs::read_to_string(&file).expect("the file");
    // Each host writes its versions in order, so the last rename is a host's last write.
    assert!(
        [first_texts.last(), second_texts.last()].contains(&Some(&left)),
        "the file is not a host's last version: {} bytes, starting {:?}",
        left.len(),
        left.lines().next()
    );
}
