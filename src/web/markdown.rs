//! Agents' markdown as HTML that cannot act: raw HTML in the text is shown as text, a link
//! goes only to http(s), mailto or a place on this page, and an image becomes a link (the
//! page loads nothing from elsewhere). What an agent wrote is data, never markup.

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// How much of a file is rendered; the rest is named, not shown.
pub const RENDER_CAP: usize = 512 * 1024;

/// Whether a link target may stay: a scheme we know to be inert, or none at all.
fn safe_url(url: &str) -> bool {
    let u = url.trim_start();
    let lower = u.to_ascii_lowercase();
    let scheme_end = lower.find(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.'));
    match scheme_end {
        Some(i) if lower[i..].starts_with(':') => ["http", "https", "mailto"].contains(&&lower[..i]),
        // No scheme: a path or an anchor (protocol-relative `//host` leaves the page).
        _ => !lower.starts_with("//") && !lower.starts_with("\\\\"),
    }
}

/// A link (or an image, shown as one) whose target is kept only when it is inert.
fn inert_link<'a>(link_type: LinkType, dest_url: CowStr<'a>, title: CowStr<'a>, id: CowStr<'a>) -> Event<'a> {
    let dest_url = if safe_url(&dest_url) {
        dest_url
    } else {
        CowStr::from("#unsafe-link")
    };
    Event::Start(Tag::Link {
        link_type,
        dest_url,
        title,
        id,
    })
}

/// `text` (markdown) rendered as inert HTML, and whether it was cut at [`RENDER_CAP`].
pub fn render(text: &str) -> (String, bool) {
    let cut = text.len() > RENDER_CAP;
    let text = if cut {
        let mut end = RENDER_CAP;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..end]
    } else {
        text
    };
    let mut opts = Options::empty();
    opts.insert(Options::ENABLE_TABLES);
    opts.insert(Options::ENABLE_STRIKETHROUGH);
    opts.insert(Options::ENABLE_TASKLISTS);
    let mut in_image = 0usize;
    let events = Parser::new_ext(text, opts).map(|e| match e {
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => inert_link(link_type, dest_url, title, id),
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => {
            in_image += 1;
            inert_link(link_type, dest_url, title, id)
        }
        Event::End(TagEnd::Image) if in_image > 0 => {
            in_image -= 1;
            Event::End(TagEnd::Link)
        }
        other => other,
    });
    let mut html = String::with_capacity(text.len() + text.len() / 4);
    pulldown_cmark::html::push_html(&mut html, events);
    (html, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_shown_as_text() {
        let (h, _) = render("hi <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n");
        assert!(!h.contains("<script"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        assert!(h.contains("&lt;script&gt;"), "{h}");
    }

    #[test]
    fn only_inert_links_stay() {
        for bad in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x]( javascript:alert(1))",
            "[x](data:text/html,<script>alert(1)</script>)",
            "[x](vbscript:msgbox)",
            "[x](//evil.example/)",
            "<javascript:alert(1)>",
            "![x](javascript:alert(1))",
        ] {
            let (h, _) = render(bad);
            let hrefs: Vec<&str> = h
                .split("href=\"")
                .skip(1)
                .map(|r| r.split('"').next().unwrap())
                .collect();
            assert_eq!(hrefs, ["#unsafe-link"], "{bad} → {h}");
            assert!(!h.contains("src="), "{bad} → {h}");
        }
        for good in [
            "[x](https://example.com/a)",
            "[x](#top)",
            "[x](artifacts/a.md)",
            "[x](mailto:a@b.c)",
        ] {
            let (h, _) = render(good);
            assert!(!h.contains("unsafe-link"), "{good} → {h}");
        }
    }

    #[test]
    fn an_image_is_a_link_and_attributes_are_escaped() {
        let (h, _) = render("![alt](https://x.example/a.png \"t\\\" onload=\\\"alert(1)\")");
        assert!(!h.contains("<img"), "{h}");
        assert!(h.contains("<a href=\"https://x.example/a.png\""), "{h}");
        assert!(!h.contains("\" onload"), "{h}");
    }

    #[test]
    fn a_huge_body_is_cut_on_a_char_boundary() {
        let big = "é".repeat(RENDER_CAP);
        let (h, cut) = render(&big);
        assert!(cut);
        assert!(h.len() < 2 * RENDER_CAP);
        let (_, cut) = render("short");
        assert!(!cut);
    }
}
