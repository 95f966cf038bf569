//! Bar charts drawn on the server as inline SVG: no script, nothing fetched. Labels are
//! text nodes, escaped by the template like every other text.

use maud::{Markup, html};

/// Height of one bar's row, and the room its label takes on the left.
const ROW: u32 = 22;
const LABEL: u32 = 260;
const BARS: u32 = 360;

/// A horizontal bar chart of `rows` (label, count), largest bar the full width.
pub fn bars(title: &str, rows: &[(String, u64)]) -> Markup {
    let max = rows.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let height = ROW * rows.len() as u32 + 4;
    let width = LABEL + BARS + 60;
    html! {
        figure.chart {
            figcaption { (title) }
            @if rows.is_empty() {
                p.quiet { "nothing to chart" }
            } @else {
                svg role="img" aria-label=(title) width=(width) height=(height)
                    viewBox=(format!("0 0 {width} {height}")) xmlns="http://www.w3.org/2000/svg" {
                    @for (i, (label, n)) in rows.iter().enumerate() {
                        @let y = ROW * i as u32;
                        @let w = ((*n as f64 / max as f64) * BARS as f64).round().max(1.0) as u32;
                        text x=(LABEL - 8) y=(y + 15) text-anchor="end" { (clipped(label)) }
                        rect x=(LABEL) y=(y + 3) width=(w) height=(ROW - 6) fill="#3b6ea5" {}
                        text x=(LABEL + w + 6) y=(y + 15) { (n) }
                    }
                }
            }
        }
    }
}

/// A label short enough for its room, its control characters shown as their pictures.
fn clipped(label: &str) -> String {
    let shown = crate::output::one_line(label).into_owned();
    match shown.chars().count() > 36 {
        true => format!("{}…", shown.chars().take(35).collect::<String>()),
        false => shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_largest_and_escape_their_labels() {
        let rows = vec![("<script>a".to_string(), 4), ("b".to_string(), 2)];
        let svg = bars("per sender", &rows).into_string();
        assert!(svg.contains("width=\"360\""), "{svg}");
        assert!(svg.contains("width=\"180\""), "{svg}");
        assert!(
            svg.contains("&lt;script&gt;a") && !svg.contains("<script>"),
            "{svg}"
        );
        assert!(
            bars("empty", &[])
                .into_string()
                .contains("nothing to chart")
        );
    }
}
