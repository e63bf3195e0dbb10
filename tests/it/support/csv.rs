//! CSV reports (`runs.csv`, `summary.csv`, `sweep.csv`) read by column name: `row["loop_rate"]`,
//! never by position, so a test says which figure it means and survives a new column.

use std::collections::BTreeMap;
use std::ops::Index;
use std::path::Path;

/// A CSV file: its rows, each keyed by the header's names.
#[derive(Debug)]
pub struct Table {
    pub rows: Vec<Row>,
}

/// One row: column name → cell, as written (quotes undone).
#[derive(Clone, Debug, PartialEq)]
pub struct Row(BTreeMap<String, String>);

impl Table {
    pub fn parse(text: &str) -> Table {
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = r.headers().expect("a header").iter().map(str::to_owned).collect();
        let rows = r
            .records()
            .map(|rec| {
                let rec = rec.expect("a CSV row");
                assert_eq!(rec.len(), header.len(), "a row with as many cells as the header: {rec:?}");
                Row(header.iter().cloned().zip(rec.iter().map(str::to_owned)).collect())
            })
            .collect();
        Table { rows }
    }

    pub fn read(path: &Path) -> Table {
        Table::parse(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    }

    /// The rows as (scenario, strategy) → column → number (`summary.csv`); cells that hold no
    /// number (empty ones, the names) are absent.
    pub fn numbers(&self) -> BTreeMap<(String, String), BTreeMap<String, f64>> {
        self.rows
            .iter()
            .map(|r| {
                let values =
                    r.0.iter()
                        .filter(|(c, _)| !["scenario", "strategy"].contains(&c.as_str()))
                        .filter_map(|(c, v)| Some((c.clone(), v.parse().ok()?)))
                        .collect();
                ((r["scenario"].clone(), r["strategy"].clone()), values)
            })
            .collect()
    }

    /// The one row whose cells are `cells` (column, value).
    pub fn row(&self, cells: &[(&str, &str)]) -> &Row {
        let found: Vec<&Row> = self.rows.iter().filter(|r| cells.iter().all(|(c, v)| r[*c] == *v)).collect();
        assert_eq!(found.len(), 1, "one row with {cells:?} in {:#?}", self.rows);
        found[0]
    }
}

impl Row {
    /// A cell read as a number (or anything else that parses).
    pub fn num<T: std::str::FromStr>(&self, column: &str) -> T
    where
        T::Err: std::fmt::Debug,
    {
        let cell = &self[column];
        cell.parse().unwrap_or_else(|e| panic!("{column} = {cell:?}: {e:?}"))
    }

    /// The cells as column → value.
    pub fn cells(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

impl Index<&str> for Row {
    type Output = String;

    fn index(&self, column: &str) -> &String {
        self.0.get(column).unwrap_or_else(|| panic!("no column {column:?}; the columns are {:?}", self.0.keys()))
    }
}
