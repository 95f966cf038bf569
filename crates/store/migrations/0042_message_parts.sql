-- A message's attachments as last listed from its source (a JSON array of part, name,
-- content_type, size; NULL until it is read), so one part can be fetched alone where the
-- provider's attachments carry no section number (Outlook).
ALTER TABLE messages ADD COLUMN parts TEXT;
