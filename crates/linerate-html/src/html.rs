//! HTML pieces: escaping, tables whose numbers carry their exact value
//! (`data-value`, the figure as the JSON has it: what the browser test
//! checks), numbers for people, the page with its inline CSS.

use std::fmt::Write;

/// Text escaped for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A table cell: text, and the exact number it shows where it is one.
#[derive(Debug, Clone)]
pub struct Cell {
    pub text: String,
    pub value: Option<f64>,
}

impl Cell {
    pub fn text(s: impl Into<String>) -> Cell {
        Cell {
            text: s.into(),
            value: None,
        }
    }

    /// A number in `unit` with an SI prefix (9.41 Gbit/s).
    pub fn si(v: f64, unit: &str) -> Cell {
        Cell {
            text: si(v, unit),
            value: Some(v),
        }
    }

    /// A plain number, up to `decimals` places.
    pub fn num(v: f64, decimals: usize) -> Cell {
        Cell {
            text: plain(v, decimals),
            value: Some(v),
        }
    }

    /// A count.
    pub fn int(v: u64) -> Cell {
        Cell {
            text: v.to_string(),
            value: Some(v as f64),
        }
    }

    /// A ratio shown in percent.
    pub fn pct(ratio: f64) -> Cell {
        Cell {
            text: format!("{}%", plain(ratio * 100.0, 4)),
            value: Some(ratio),
        }
    }

    /// A number or a dash.
    pub fn opt(v: Option<f64>, f: impl Fn(f64) -> Cell) -> Cell {
        v.map_or_else(|| Cell::text("–"), f)
    }
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::text(s)
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::text(s)
    }
}

/// `v` with up to `decimals` places, trailing zeros dropped.
pub fn plain(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let s = format!("{v:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".into() } else { s }
}

/// `v` in `unit` with an SI prefix, four significant digits.
pub fn si(v: f64, unit: &str) -> String {
    let a = v.abs();
    let (p, d) = if a >= 1e12 {
        ("T", 1e12)
    } else if a >= 1e9 {
        ("G", 1e9)
    } else if a >= 1e6 {
        ("M", 1e6)
    } else if a >= 1e3 {
        ("k", 1e3)
    } else {
        ("", 1.0)
    };
    let x = v / d;
    let decimals = if x.abs() >= 100.0 {
        1
    } else if x.abs() >= 10.0 {
        2
    } else {
        3
    };
    let sep = if unit.is_empty() { "" } else { " " };
    format!("{}{sep}{p}{unit}", plain(x, decimals))
}

/// A table with a caption (`class` names it for tests and CSS).
pub fn table(class: &str, caption: &str, head: &[&str], rows: &[Vec<Cell>]) -> String {
    let mut s = format!(
        "<div class=\"scroll\"><table class=\"{}\"><caption>{}</caption><thead><tr>",
        esc(class),
        esc(caption)
    );
    for h in head {
        let _ = write!(s, "<th scope=\"col\">{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            match c.value {
                Some(v) if v.is_finite() => {
                    let _ = write!(
                        s,
                        "<td class=\"n\" data-value=\"{v}\">{}</td>",
                        esc(&c.text)
                    );
                }
                _ => {
                    let _ = write!(s, "<td>{}</td>", esc(&c.text));
                }
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>\n");
    s
}

/// A chart as inline SVG in a figure, or why it is not drawn.
pub fn figure(chart: Result<linerate_plot::Chart, linerate_plot::PlotError>) -> Option<String> {
    let c = chart.ok()?;
    match linerate_plot::svg(&c) {
        Ok(svg) => {
            // Scalable: the drawing's own size as its view box.
            let svg = svg.replacen(
                "<svg ",
                "<svg role=\"img\" preserveAspectRatio=\"xMidYMid meet\" ",
                1,
            );
            Some(format!(
                "<figure class=\"plot\">{svg}<figcaption>{}</figcaption></figure>\n",
                esc(&c.title)
            ))
        }
        Err(e) => Some(format!(
            "<p class=\"note\">{} not drawn: {}</p>",
            esc(&c.title),
            esc(&e.to_string())
        )),
    }
}

/// Key–value facts as a definition list.
pub fn facts(items: &[(&str, String)]) -> String {
    let mut s = String::from("<dl class=\"facts\">");
    for (k, v) in items.iter().filter(|(_, v)| !v.is_empty()) {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
    }
    s.push_str("</dl>\n");
    s
}

/// Inline CSS: readable on a phone (tables scroll sideways, plots scale)
/// and printed (no backgrounds needed, sections not split inside).
const CSS: &str = "
:root{color-scheme:light}
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:0 auto;max-width:70rem;padding:1rem;color:#111;line-height:1.4}
h1{font-size:1.5rem;margin:.2rem 0 1rem}h2{font-size:1.25rem;border-bottom:2px solid #333;margin-top:2rem}h3{font-size:1.05rem}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;margin:.5rem 0 1rem}
table{border-collapse:collapse;font-size:.9rem;min-width:50%}
caption{text-align:left;font-weight:600;padding:.3rem 0}
th,td{border:1px solid #bbb;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#eee}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
figure.plot{margin:1rem 0;page-break-inside:avoid;break-inside:avoid}
figure.plot svg{width:100%;height:auto;max-width:960px;display:block}
figcaption{font-size:.85rem;color:#444}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;font-size:.9rem}
dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}
.note{background:#fff4d6;border-left:4px solid #d9a400;padding:.4rem .6rem}
.bad{color:#a00;font-weight:600}.good{color:#060;font-weight:600}
pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.8rem;background:#f6f6f6;padding:.5rem}
section{page-break-inside:auto}
@media print{body{max-width:none;padding:0}h2{page-break-after:avoid}.scroll{overflow:visible}th{background:none}}
@media (max-width:600px){body{padding:.5rem}table{font-size:.8rem}}
";

/// The whole page: title and body, nothing fetched from anywhere.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
         <title>{}</title><style>{CSS}</style></head>\n<body>\n<h1>{}</h1>\n{body}\
         <footer><p class=\"small\">Made by linerate {} (linerate report): one file, nothing fetched.</p></footer>\n</body></html>\n",
        esc(title),
        esc(title),
        env!("CARGO_PKG_VERSION")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_numbers_keep_their_value() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let t = table(
            "t",
            "cap <1>",
            &["a", "b"],
            &[vec![Cell::si(9.41e9, "bit/s"), Cell::text("<x>")]],
        );
        assert!(t.contains("<caption>cap &lt;1&gt;</caption>"), "{t}");
        assert!(
            t.contains("data-value=\"9410000000\">9.41 Gbit/s</td>"),
            "{t}"
        );
        assert!(t.contains("<td>&lt;x&gt;</td>"), "{t}");
        assert_eq!(si(14_880_952.0, "frames/s"), "14.88 Mframes/s");
        assert_eq!(si(0.5, ""), "0.5");
        assert_eq!(plain(-0.0001, 2), "0");
        assert_eq!(Cell::pct(0.001).text, "0.1%");
    }
}
