//! Many chats at once: hundreds of tasks appending and reading concurrently all
//! land, and each conversation keeps the order its steps were appended in.

use std::collections::HashMap;
use std::sync::Arc;

use rojos_conversations::{ConversationId, ConversationStore};
use serde_json::Value;
use tokio::task::JoinSet;

use crate::support::{assistant, on_both_backends, user, Backend};

const TASKS: usize = 200;
const STEPS: usize = 3;

/// The two messages of step `step` of task `task`.
fn step_messages(task: usize, step: usize) -> Vec<Value> {
    let tag = format!("t{task} s{step}");
    vec![user(&tag), assistant(&format!("{tag} reply"))]
}

async fn two_hundred_concurrent_tasks_all_land_with_order_kept(backend: Backend) {
    let (_fx, store) = backend.open().await;
    let shared = store.create("demo", "default").await.unwrap();
    let mut own = Vec::new();
    for _ in 0..TASKS / 2 {
        own.push(store.create("demo", "default").await.unwrap());
    }

    // Half the tasks each write their own conversation, half share one.
    let mut tasks = JoinSet::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        let target = own.get(task).cloned().unwrap_or_else(|| shared.clone());
        let alone = task < TASKS / 2;
        tasks.spawn(async move {
            for step in 0..STEPS {
                let messages = step_messages(task, step);
                store.append(&target, messages.clone()).await.unwrap();
                // A read right after the append sees it.
                let seen = store.get(&target).await.unwrap().unwrap().messages;
                if alone {
                    let so_far: Vec<Value> =
                        (0..=step).flat_map(|s| step_messages(task, s)).collect();
                    assert_eq!(seen, so_far);
                } else {
                    assert!(seen.windows(2).any(|pair| pair == messages.as_slice()));
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }

    for (task, id) in own.iter().enumerate() {
        let expected: Vec<Value> = (0..STEPS).flat_map(|s| step_messages(task, s)).collect();
        assert_eq!(store.get(id).await.unwrap().unwrap().messages, expected);
    }
    assert_shared_history(store.as_ref(), &shared).await;
}

/// Every shared-conversation step is there once, its two messages adjacent, and
/// each task's steps appear in the order that task appended them.
async fn assert_shared_history(store: &dyn ConversationStore, id: &ConversationId) {
    let messages = store.get(id).await.unwrap().unwrap().messages;
    assert_eq!(messages.len(), (TASKS / 2) * STEPS * 2);
    let mut next_step: HashMap<usize, usize> = HashMap::new();
    for pair in messages.chunks(2) {
        let tag = pair[0]["content"].as_str().unwrap();
        let (task, step) = parse_tag(tag);
        assert_eq!(pair, step_messages(task, step).as_slice());
        let expected = next_step.entry(task).or_insert(0);
        assert_eq!(step, *expected, "task {task} steps out of order");
        *expected += 1;
    }
    assert_eq!(next_step.len(), TASKS / 2);
    assert!(next_step.values().all(|&n| n == STEPS));
    let listed = store.list("demo", TASKS * 2).await.unwrap();
    assert_eq!(listed.len(), TASKS / 2 + 1);
}

fn parse_tag(tag: &str) -> (usize, usize) {
    let (task, step) = tag.split_once(' ').unwrap();
    (
        task.trim_start_matches('t').parse().unwrap(),
        step.trim_start_matches('s').parse().unwrap(),
    )
}

on_both_backends!(two_hundred_concurrent_tasks_all_land_with_order_kept,);
