<?php
// Builds the victim's SQLite database: 2,000 pages of ~2 KiB wiki text.
$path = $argv[1];
@unlink($path);
$db = new SQLite3($path);
$db->exec('CREATE TABLE page (id INTEGER PRIMARY KEY, title TEXT, body TEXT)');
$db->exec('BEGIN');
$stmt = $db->prepare('INSERT INTO page (id, title, body) VALUES (:id, :title, :body)');
mt_srand(42);
for ($i = 1; $i <= 2000; $i++) {
  $words = [];
  for ($w = 0; $w < 300; $w++) {
    $len = mt_rand(3, 9);
    $word = substr(str_shuffle('abcdefghijklmnopqrstuvwxyz'), 0, $len);
    $k = mt_rand(0, 20);
    if ($k == 0) $word = "[[Page_$word|$word]]";
    elseif ($k == 1) $word = "'''$word'''";
    elseif ($k == 2) $word = "''$word''";
    $words[] = $word;
  }
  $stmt->bindValue(':id', $i);
  $stmt->bindValue(':title', "Page $i");
  $stmt->bindValue(':body', implode(' ', $words));
  $stmt->execute();
}
$db->exec('COMMIT');
