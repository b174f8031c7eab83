//! ManageSieve (RFC 5804). PLACEHOLDER: being written.
