<?php
// The victim's page: a stand-in for a MediaWiki article view (Debian 12
// ships no mediawiki package). One SQLite query for a "revision" and its
// neighbours, then wiki-markup-like rendering: about 5 ms of CPU per request
// on the project machine (run.sh calibrates and prints the real figure).
$db = new SQLite3(__DIR__ . '/wiki.sqlite', SQLITE3_OPEN_READONLY);
$n = (int)(getenv('HOG_ROWS') ?: 50);
$id = mt_rand(1, 2000 - $n);
$rows = $db->query("SELECT title, body FROM page WHERE id BETWEEN $id AND $id + $n - 1 ORDER BY title");
$rounds = 1;
$out = '';
while ($row = $rows->fetchArray(SQLITE3_ASSOC)) {
  $text = $row['body'];
  for ($r = 0; $r < $rounds; $r++) {
    $text = preg_replace('/\[\[([^\]|]+)\|?([^\]]*)\]\]/', '<a href="/wiki/$1">$2</a>', $text);
    $text = str_replace(["'''", "''"], ['<b>', '<i>'], $text);
    $words = explode(' ', $text);
    sort($words);
    $text = implode(' ', array_reverse($words));
  }
  $out .= '<h2>' . htmlspecialchars($row['title']) . '</h2><p>' . md5($text) . '</p>';
}
header('Content-Type: text/html');
echo "<html><body>$out</body></html>\n";
