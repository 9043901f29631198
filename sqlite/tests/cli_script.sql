-- Run by cli.sh through Debian's sqlite3, once with the VFS (@VFS@ is
-- "?vfs=pagecache") and once with the default VFS (@VFS@ empty); the
-- two outputs must be the same.  Deterministic: no random().
.bail on
.headers on
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, qty INTEGER, note BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
INSERT INTO item SELECT i, 'item-' || (i * 7919 % 20011), (i * 37 % 1000) / 10.0, i % 97,
       zeroblob(i % 700) FROM n;
CREATE INDEX item_name ON item(name);
CREATE INDEX item_qty_price ON item(qty, price);
SELECT count(*), sum(qty), round(sum(price), 1), sum(length(note)) FROM item;
SELECT name, price FROM item WHERE name BETWEEN 'item-1000' AND 'item-1010' ORDER BY name;
SELECT qty, count(*), round(avg(price), 3) FROM item GROUP BY qty HAVING qty < 5;
UPDATE item SET price = price * 2 WHERE qty = 3;
DELETE FROM item WHERE id % 5 = 0;
SELECT count(*), round(sum(price), 1) FROM item;
VACUUM;
PRAGMA integrity_check;
PRAGMA page_count;
ATTACH 'file:second.db@VFS@' AS second;
CREATE TABLE second.orders(id INTEGER PRIMARY KEY, item_id INTEGER, amount INTEGER);
INSERT INTO second.orders(item_id, amount) SELECT id, qty * 3 FROM item WHERE id % 3 = 0;
-- One transaction over both databases: a super-journal.
BEGIN;
UPDATE item SET qty = qty + 1 WHERE id IN (SELECT item_id FROM second.orders WHERE amount > 200);
DELETE FROM second.orders WHERE amount > 200;
COMMIT;
SELECT count(*), sum(amount) FROM second.orders;
SELECT i.name, o.amount FROM item i JOIN second.orders o ON o.item_id = i.id ORDER BY o.id LIMIT 5;
PRAGMA second.integrity_check;
.once dump-main.sql
.dump
DETACH second;
.open file:restored.db@VFS@
.read dump-main.sql
SELECT count(*), sum(qty), round(sum(price), 1), sum(length(note)) FROM item;
SELECT count(*) FROM sqlite_schema WHERE type = 'index';
PRAGMA integrity_check;
.once dump-restored.sql
.dump
