//! The in-memory index settles a sync as the store does: a moved message keeps its local
//! id, recognised by id or by Message-ID and size; a Message-ID two messages share is never
//! guessed at.

use mailbroker_core::{
    Arrival, MessageFlags, MessageMeta, RemoteId, SameMessage, Seen, SyncSink, Version,
};
use mailbroker_testkit::memory::MemoryIndex;

fn meta(id: &str, message_id: &str, size: u64) -> MessageMeta {
    MessageMeta {
        id: RemoteId::new(id),
        message_id: Some(message_id.to_string()),
        size,
        ..MessageMeta::default()
    }
}

fn arrival(id: &str, message_id: &str, size: u64) -> Arrival {
    Arrival {
        id: RemoteId::new(id),
        version: Version::default(),
        flags: MessageFlags::default(),
        same: SameMessage::Content {
            message_id: message_id.to_string(),
            size: Some(size),
        },
    }
}

#[tokio::test]
async fn moves_keep_their_rows_and_shared_message_ids_are_not_guessed() {
    let mut index = MemoryIndex::new();
    let inbox = vec![
        meta("1", "<a@x>", 10),
        meta("2", "<b@x>", 20),
        meta("3", "<b@x>", 20),
    ];
    index
        .apply(Seen::Arrived {
            mailbox: "INBOX".to_string(),
            messages: inbox,
        })
        .await
        .unwrap();
    let a = index.local("1").unwrap().1;
    let departures = vec![(
        "INBOX".to_string(),
        ["1", "2", "3"].map(RemoteId::new).to_vec(),
    )];
    let arrivals = vec![(
        "Archive".to_string(),
        vec![
            arrival("9", "<a@x>", 10),
            arrival("10", "<b@x>", 20),
            arrival("11", "<b@x>", 20),
        ],
    )];
    let settled = index.settle_moves(departures, arrivals).await.unwrap();
    assert_eq!(
        index.local("9"),
        Some(("Archive".into(), a)),
        "moved, its row kept"
    );
    let archive = settled.iter().find(|s| s.mailbox == "Archive").unwrap();
    assert_eq!(archive.moved_in, 1);
    assert_eq!(archive.unmatched, ["10", "11"].map(RemoteId::new).to_vec());
    let inbox = settled.iter().find(|s| s.mailbox == "INBOX").unwrap();
    assert_eq!(
        inbox.removed, 2,
        "the twins are removed, to be fetched again"
    );
    assert_eq!(index.count("INBOX"), 0);

    // A provider whose ids survive a move: the same id in another mailbox is the message.
    mailbroker_core::place(&mut index, "Trash", vec![meta("9", "<a@x>", 10)])
        .await
        .unwrap();
    assert_eq!(index.local("9"), Some(("Trash".into(), a)));
    assert_eq!(index.count("Archive"), 0);
}
