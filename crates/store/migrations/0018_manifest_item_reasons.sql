-- Why a staged item was left alone (`moved`: no longer where it was staged), which the
-- manifest's counts show beside its status.
ALTER TABLE manifest_items ADD COLUMN reason TEXT;
