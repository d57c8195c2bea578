//! The simulation report as one self-contained HTML page: inline SVG charts (drawn with plotters' SVG backend,
//! text left to the browser's fonts) and tables, with no script and nothing fetched when it is viewed.

mod charts;
mod heatmap;
mod page;

pub use heatmap::{NodeUse, node_uses};
pub use page::render_html;

/// Why a report could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// plotters refused to draw a chart.
    #[error("drawing the {chart} chart: {message}")]
    Draw {
        /// Which chart.
        chart: &'static str,
        /// plotters' message.
        message: String,
    },
}

impl ReportError {
    fn draw(chart: &'static str) -> impl Fn(String) -> ReportError {
        move |message| ReportError::Draw { chart, message }
    }
}

/// Escapes text for HTML element content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<a href=\"x\">T&C's</a>"),
            "&lt;a href=&quot;x&quot;&gt;T&amp;C&#39;s&lt;/a&gt;"
        );
    }
}
