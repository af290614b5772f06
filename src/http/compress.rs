//! Compression of the answers: gzip when the client takes it, the
//! per-tick answer compressed once beside the loop.

use super::*;

/// `bytes` gzip-compressed (fastest level: the answer is sent many times
/// a tick at most, and is mostly repeated keys), or none if that failed.
pub(super) fn gzip(bytes: &[u8]) -> Option<axum::body::Bytes> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 8),
        flate2::Compression::fast(),
    );
    enc.write_all(bytes).ok()?;
    enc.finish().ok().map(axum::body::Bytes::from)
}

/// Whether the request's `Accept-Encoding` takes gzip: named, or `*`,
/// with a non-zero weight; `gzip;q=0` refuses it whatever `*` says.
pub(super) fn takes_gzip(headers: &HeaderMap) -> bool {
    let codings: Vec<(String, bool)> = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|part| {
            let mut it = part.split(';').map(str::trim);
            let coding = it.next().unwrap_or_default().to_ascii_lowercase();
            let refused = it.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q == 0.0)
            });
            (coding, !refused)
        })
        .collect();
    match codings.iter().find(|(c, _)| c == "gzip") {
        Some((_, taken)) => *taken,
        None => codings.iter().any(|(c, taken)| c == "*" && *taken),
    }
}

/// An answer: compressed when the client takes gzip and there is a
/// compressed copy, plain otherwise.
pub(super) fn cached(
    headers: &HeaderMap,
    plain: &axum::body::Bytes,
    compressed: Option<&axum::body::Bytes>,
    content_type: &'static str,
) -> Response {
    let gz = takes_gzip(headers).then(|| compressed.cloned()).flatten();
    match gz {
        Some(body) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, content_type),
                (header::CONTENT_ENCODING, "gzip"),
                (header::VARY, "accept-encoding"),
            ],
            body,
        )
            .into_response(),
        None => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, content_type),
                (header::VARY, "accept-encoding"),
            ],
            plain.clone(),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepting(v: &str) -> bool {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT_ENCODING, v.parse().expect("header"));
        takes_gzip(&h)
    }

    #[test]
    fn gzip_only_when_the_client_takes_it() {
        assert!(accepting("gzip"));
        assert!(accepting("deflate, gzip;q=1.0, *;q=0.5"));
        assert!(accepting("GZIP"));
        assert!(accepting("*"));
        assert!(!accepting("gzip;q=0"));
        assert!(!accepting("gzip;q=0, *"));
        assert!(!accepting("*;q=0"));
        assert!(!accepting("identity"));
        assert!(!accepting("br, deflate"));
        assert!(!takes_gzip(&HeaderMap::new()));
        let text = b"crewlet_trim_to 40\n".repeat(1000);
        let gz = gzip(&text).expect("compressed");
        assert!(gz.len() < text.len() / 10);
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut out)
            .expect("decompress");
        assert_eq!(out, text);
    }
}
