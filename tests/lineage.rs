//! OpenLineage: the events of a run sequence valid against the vendored
//! official spec and facet schemas, and the HTTP transport against a real
//! receiver on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use harness::receiver;

/// The receiver records what it got, and answers 500 to the first N requests.
#[tokio::test]
async fn the_receiver_records_requests_and_fails_the_first_n() {
    let (url, receiver) = receiver::start();
    receiver.fail_first(1);
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let response = client
            .post(format!("{url}/hook?x=1"))
            .header("authorization", "Bearer t0ken")
            .body(r#"{"a":1}"#)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [500, 200]);
    let received = receiver.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].method, "POST");
    assert_eq!(received[1].path, "/hook?x=1");
    assert_eq!(received[1].header("Authorization"), Some("Bearer t0ken"));
    assert_eq!(received[1].json()["a"], 1);
    assert_eq!(receiver.delivered().len(), 1);
}
