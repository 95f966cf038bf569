fn main() {
    // Rebuild when a migration changes: `sqlx::migrate!` embeds them at compile time.
    println!("cargo:rerun-if-changed=migrations");
}
