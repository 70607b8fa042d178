//! The glob patterns of name listings, as Redis's `SCAN MATCH` applies them (every backend
//! that lists names matches them alike).

/// Redis's glob match (`*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`), as `SCAN MATCH` applies it;
/// in time linear in the pattern times the text (a `*` that failed is retried from the
/// last one only, never as a tree of choices).
pub(crate) fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: (pattern after it, text position it covers to).
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                resume = Some((p + 1, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => class(&pattern[p..], text[t]),
            Some(b'\\') if p + 1 < pattern.len() => (pattern[p + 1] == text[t]).then_some(2),
            Some(&c) => (c == text[t]).then_some(1),
            None => None,
        };
        match (step, resume) {
            (Some(width), _) => {
                p += width;
                t += 1;
            }
            (None, Some((after_star, covered))) => {
                // The last `*` takes one more character.
                p = after_star;
                t = covered + 1;
                resume = Some((after_star, covered + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Whether the class at the start of `pattern` (`[…]`) matches `c`: the pattern's width
/// when it does.
fn class(pattern: &[u8], c: u8) -> Option<usize> {
    let end = pattern.iter().skip(1).position(|&b| b == b']')? + 1;
    let set = &pattern[1..end];
    let (negate, set) = match set.first() {
        Some(b'^') => (true, &set[1..]),
        _ => (false, set),
    };
    let mut hit = false;
    let mut i = 0;
    while i < set.len() {
        if i + 2 < set.len() && set[i + 1] == b'-' {
            hit |= set[i] <= c && c <= set[i + 2];
            i += 3;
        } else {
            hit |= set[i] == c;
            i += 1;
        }
    }
    (hit != negate).then_some(end + 1)
}

#[cfg(test)]
mod tests {
    use crate::backend::glob::glob;

    #[test]
    fn globs_match_as_redis_does() {
        let cases: [(&str, &str, bool); 12] = [
            ("order:*", "order:42", true),
            ("order:*", "orders:1", false),
            ("order:?", "order:4", true),
            ("order:?", "order:42", false),
            ("order:[0-9]", "order:7", true),
            ("order:[^0-9]", "order:7", false),
            ("order:[ab]*", "order:b12", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("*", "", true),
            ("*a*a*a*a*a*a*a*a*b", &"a".repeat(200), false),
            ("*:*:*", "a:b:c", true),
        ];
        for (pattern, text, matches) in cases {
            assert_eq!(
                glob(pattern.as_bytes(), text.as_bytes()),
                matches,
                "{pattern} {text}"
            );
        }
    }
}
