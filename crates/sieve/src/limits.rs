//! What bounds a script and one run of it.

/// What bounds a script and one run of it (docs/limits.md "Sieve").
#[derive(Debug, Clone)]
pub struct Limits {
    /// A script's source, in bytes (`sieve_script_bytes_max`).
    pub script_bytes_max: usize,
    /// Commands and tests evaluated in one run, included scripts counted
    /// (`sieve_instructions_max`); past it the run fails (and the message is kept).
    pub instructions_max: u64,
    /// Header fields added or deleted by one run (`sieve_header_edits_max`).
    pub header_edits_max: usize,
    /// Bytes of the value `addheader` adds (`sieve_header_value_bytes_max`; RFC 5293 4
    /// lets an implementation set a limit not under 998): a constant value over it does
    /// not compile, one built at run time fails the run. 2048 by default, as Pigeonhole's
    /// `sieve_editheader_max_header_size`.
    pub header_value_bytes_max: usize,
    /// Redirects one run may make (`sieve_redirects_max`).
    pub redirects_max: usize,
    /// Actions one run may take (`sieve_actions_max`; RFC 5228 2.10.4 lets a site limit
    /// them): distinct keeps, fileintos, redirects, rejects and vacations, duplicates
    /// merged and the implicit keep not counted. Past it the run fails (and the message is
    /// kept), as with Pigeonhole's `sieve_max_actions` (also 32 by default).
    pub actions_max: usize,
    /// Vacation replies one run may make (`sieve_vacation_max`; RFC 5230 allows one).
    pub vacation_max: usize,
    /// Nested includes (`sieve_include_depth_max`).
    pub include_depth_max: usize,
    /// Variables one run may hold, and the bytes of one variable's value
    /// (`sieve_variables_max`, `sieve_variable_bytes_max`).
    pub variables_max: usize,
    pub variable_bytes_max: usize,
    /// Nesting of blocks and tests in the source (`sieve_nesting_max`).
    pub nesting_max: usize,
    /// Bytes of a message body a `body` test looks at (`sieve_body_bytes_max`).
    pub body_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            script_bytes_max: 64 * 1024,
            instructions_max: 10_000,
            header_edits_max: 32,
            header_value_bytes_max: 2048,
            redirects_max: 4,
            actions_max: 32,
            vacation_max: 1,
            include_depth_max: 5,
            variables_max: 128,
            variable_bytes_max: 4096,
            nesting_max: 32,
            body_bytes_max: 1024 * 1024,
        }
    }
}
