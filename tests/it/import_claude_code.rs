//! The claude-code importer on real files: counts derived by hand from the files' own fields.
