//! A call given up after a limit, and said the same way wherever a store
//! is asked: "WHAT: no answer within D". A store that stops answering
//! fails the call; it never holds the tick past its deadline.

use std::future::Future;
use std::time::Duration;

/// `call`, or the error that it gave no answer within `limit`.
pub async fn within<T>(
    limit: Duration,
    what: impl FnOnce() -> String,
    call: impl Future<Output = Result<T, String>>,
) -> Result<T, String> {
    match tokio::time::timeout(limit, call).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "{}: no answer within {}",
            what(),
            crate::human::duration(limit)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_past_its_limit_is_said_with_what_it_was() {
        let slow = within(
            Duration::from_millis(10),
            || "listing s3://a".into(),
            async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok::<_, String>(())
            },
        )
        .await;
        assert_eq!(
            slow,
            Err(format!(
                "listing s3://a: no answer within {}",
                crate::human::duration(Duration::from_millis(10))
            ))
        );
        let quick = within(Duration::from_secs(1), || unreachable!(), async {
            Ok::<_, String>(7)
        })
        .await;
        assert_eq!(quick, Ok(7));
    }
}
