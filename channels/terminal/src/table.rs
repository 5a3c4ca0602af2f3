//! A reply's table, drawn with box lines once all its rows are in (pulldown-cmark parses
//! it; cells keep their inline styles and the columns their alignment). Rows that do not
//! make a table, or a table wider than the terminal, are shown line by line instead.

use pulldown_cmark::{Alignment, Event, Parser, Tag, TagEnd};

use crate::inline::{self, Styled};
use crate::style::{self, Paint};
use crate::width;

/// The rows of a table: its cells, styled.
struct Grid {
    align: Vec<Alignment>,
    rows: Vec<Vec<String>>,
}

/// The lines showing `rows` (markdown table rows) on a terminal `cols` wide.
pub fn render(rows: &[String], paint: Paint, cols: usize) -> Vec<String> {
    let source = rows.join("\n");
    match grid(&source, paint, cols) {
        Some(grid) => draw(&grid, paint, cols)
            .unwrap_or_else(|| rows.iter().map(|r| inline::line(r, paint, cols)).collect()),
        None => rows.iter().map(|r| inline::line(r, paint, cols)).collect(),
    }
}

/// The table's cells, or `None` when the rows are not a table.
fn grid(source: &str, paint: Paint, cols: usize) -> Option<Grid> {
    let mut grid = Grid {
        align: Vec::new(),
        rows: Vec::new(),
    };
    let mut cell: Option<Styled> = None;
    let mut found = false;
    for event in Parser::new_ext(source, inline::options()) {
        match event {
            Event::Start(Tag::Table(align)) => {
                found = true;
                grid.align = align;
            }
            Event::Start(Tag::TableHead | Tag::TableRow) => grid.rows.push(Vec::new()),
            Event::Start(Tag::TableCell) => cell = Some(Styled::new(paint)),
            Event::End(TagEnd::TableCell) => {
                if let (Some(done), Some(row)) = (cell.take(), grid.rows.last_mut()) {
                    row.push(done.text);
                }
            }
            event => {
                if let Some(cell) = cell.as_mut() {
                    cell.event(event, cols);
                }
            }
        }
    }
    (found && !grid.rows.is_empty()).then_some(grid)
}

/// The box lines of `grid`, or `None` when it is wider than `cols`.
fn draw(grid: &Grid, paint: Paint, cols: usize) -> Option<Vec<String>> {
    let n = grid.rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            grid.rows
                .iter()
                .filter_map(|row| row.get(i))
                .map(|cell| width::columns(cell))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let total: usize = widths.iter().map(|w| w + 3).sum::<usize>() + 1;
    if total > cols {
        return None;
    }
    let frame = |text: &str| paint.paint(style::FRAME, text);
    let rule = |left: &str, mid: &str, right: &str| {
        let parts: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
        frame(&format!("{left}{}{right}", parts.join(mid)))
    };
    let mut lines = vec![rule("┌", "┬", "┐")];
    for (i, row) in grid.rows.iter().enumerate() {
        let mut line = frame("│");
        for (c, width) in widths.iter().enumerate() {
            let cell = row.get(c).map(String::as_str).unwrap_or("");
            let align = grid.align.get(c).copied().unwrap_or(Alignment::None);
            line.push_str(&format!(" {} ", pad(cell, *width, align)));
            line.push_str(&frame("│"));
        }
        lines.push(line);
        if i == 0 && grid.rows.len() > 1 {
            lines.push(rule("├", "┼", "┤"));
        }
    }
    lines.push(rule("└", "┴", "┘"));
    Some(lines)
}

/// `cell` filled out to `width` columns as the column is aligned.
fn pad(cell: &str, width: usize, align: Alignment) -> String {
    let room = width.saturating_sub(width::columns(cell));
    let (left, right) = match align {
        Alignment::Right => (room, 0),
        Alignment::Center => (room / 2, room - room / 2),
        Alignment::Left | Alignment::None => (0, room),
    };
    format!("{}{cell}{}", " ".repeat(left), " ".repeat(right))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::width::strip;

    fn rows(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| (*l).to_owned()).collect()
    }

    #[test]
    fn a_table_is_drawn_with_box_lines_and_aligned_columns() {
        let table = rows(&["| name | n |", "|---|--:|", "| **ab** | 1 |", "| c | 22 |"]);
        let lines: Vec<String> = render(&table, Paint::new(true), 80)
            .iter()
            .map(|l| strip(l))
            .collect();
        assert_eq!(
            lines,
            [
                "┌──────┬────┐",
                "│ name │  n │",
                "├──────┼────┤",
                "│ ab   │  1 │",
                "│ c    │ 22 │",
                "└──────┴────┘",
            ]
        );
    }

    #[test]
    fn rows_that_are_no_table_or_too_wide_are_shown_as_lines() {
        let lone = rows(&["| just a line |"]);
        assert_eq!(render(&lone, Paint::new(false), 80), ["| just a line |"]);
        let table = rows(&["| a | b |", "|---|---|", "| 1 | 2 |"]);
        let narrow = render(&table, Paint::new(false), 8);
        assert_eq!(narrow.len(), 3, "{narrow:?}");
    }
}
