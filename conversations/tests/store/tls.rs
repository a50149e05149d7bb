//! TLS to PostgreSQL, against a throwaway server that accepts TLS logins only, with a
//! certificate for `127.0.0.1` signed by a test CA: `require` connects without checking the
//! certificate, `verify-full` connects when given the CA and refuses the server when not,
//! `disable` is refused by the server.

use std::path::PathBuf;
use std::sync::OnceLock;

use rojos_conversations::test_cluster::{ClusterOptions, PgCluster};
use rojos_conversations::{
    ConversationStore, PostgresOptions, PostgresStore, PostgresTls, StoreError,
};

use crate::support::{chain, user};

fn tls_cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        PgCluster::start_with(ClusterOptions {
            tls: true,
            ..ClusterOptions::default()
        })
        .unwrap_or_else(|e| panic!("cannot start the test PostgreSQL server: {e}"))
    })
}

fn options(tls: PostgresTls) -> PostgresOptions {
    let cluster = tls_cluster();
    let database = cluster.create_database().unwrap();
    let mut options = PostgresOptions::from_url(&cluster.url(&database))
        .unwrap()
        .with_password(&cluster.password());
    options.tls = tls;
    options
}

async fn works(options: &PostgresOptions) {
    let store = PostgresStore::connect(options).await.unwrap();
    let id = store.create("demo", "default").await.unwrap();
    store.append(&id, vec![user("over TLS")]).await.unwrap();
    assert_eq!(
        store.get(&id).await.unwrap().unwrap().messages,
        vec![user("over TLS")]
    );
}

#[tokio::test]
async fn require_connects_over_tls() {
    works(&options(PostgresTls::Require)).await;
}

#[tokio::test]
async fn verify_full_connects_to_a_server_whose_certificate_the_ca_file_signed() {
    let ca_file = Some(tls_cluster().ca_file());
    works(&options(PostgresTls::VerifyFull { ca_file })).await;
}

#[tokio::test]
async fn verify_full_refuses_a_server_whose_certificate_it_cannot_verify() {
    let options = options(PostgresTls::VerifyFull { ca_file: None });

    let err = PostgresStore::connect(&options).await.unwrap_err();

    let text = chain(&err);
    assert!(
        matches!(err, StoreError::Backend { .. }),
        "not an outage: {text}"
    );
    assert!(text.contains("UnknownIssuer"), "{text}");
}

#[tokio::test]
async fn a_server_that_requires_tls_refuses_a_plain_connection() {
    let err = PostgresStore::connect(&options(PostgresTls::Disable))
        .await
        .unwrap_err();

    let text = chain(&err);
    assert!(text.contains("no encryption"), "{text}");
}

#[tokio::test]
async fn an_unreadable_ca_file_is_named() {
    let missing = PathBuf::from("/nonexistent/ca.pem");
    let options = options(PostgresTls::VerifyFull {
        ca_file: Some(missing),
    });

    let err = PostgresStore::open(&options).unwrap_err();

    let text = chain(&err);
    assert!(
        text.contains("cannot read the CA file '/nonexistent/ca.pem'"),
        "{text}"
    );
}
