//! The mini-swe-agent importer on real files: counts derived by hand from the files' own fields.
