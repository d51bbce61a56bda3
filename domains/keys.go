package domains

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/klasy/klasy/agent"
)

// certLifetime is how long the certificates GenerateKeys issues are
// valid; they start an hour back, for guests whose clock lags the host's.
const certLifetime = 3 * 365 * 24 * time.Hour

// GenerateKeys makes the key material f names and does not have yet:
// the CA (certificate and key, when f names a CA key), the controller's
// certificate and key, and each domain's (certificate for its name, for
// server authentication only). Keys are ECDSA P-256 from crypto/rand;
// private keys are written mode 0600. A certificate and key that exist
// are kept when the certificate was issued by f's CA; one of a pair
// without the other, or a certificate of another CA, is an error (so a
// key is never silently replaced). It returns the files it wrote.
func GenerateKeys(f *File) ([]string, error) {
	if f.CA.Key == "" {
		return nil, &Error{File: f.Path, Msg: "ca.key: missing; klasy needs the CA's key to issue certificates"}
	}
	var wrote []string
	ca, caKey, made, err := loadOrMakeCA(f)
	if err != nil {
		return nil, err
	}
	if made {
		wrote = append(wrote, f.CA.Cert, f.CA.Key)
	}
	issue := func(kp KeyPair, name string, client bool) error {
		if kp.Cert == "" || kp.Key == "" {
			return nil
		}
		haveCert, haveKey := exists(kp.Cert), exists(kp.Key)
		switch {
		case haveCert && haveKey:
			cert, err := readCert(kp.Cert)
			if err != nil {
				return err
			}
			if err := cert.CheckSignatureFrom(ca); err != nil {
				return fmt.Errorf("%s was not issued by the CA %s of %s: remove it (and %s) to issue a new one", kp.Cert, f.CA.Cert, f.Path, kp.Key)
			}
			return nil
		case haveCert || haveKey:
			return fmt.Errorf("%s exists but %s does not: remove the other one too to issue a new pair", first(haveCert, kp.Cert, kp.Key), first(haveCert, kp.Key, kp.Cert))
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl, err := template(name)
		if err != nil {
			return err
		}
		if client {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		} else {
			tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			tmpl.DNSNames = []string{name}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("issuing the certificate of %s: %w", name, err)
		}
		if err := writeKeyPair(kp, der, key); err != nil {
			return err
		}
		wrote = append(wrote, kp.Cert, kp.Key)
		return nil
	}
	if err := issue(f.Controller, agent.ControllerName, true); err != nil {
		return wrote, err
	}
	for _, d := range f.Domains {
		if err := issue(d.KeyPair, d.Name, false); err != nil {
			return wrote, err
		}
	}
	return wrote, nil
}

func first(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func template(cn string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"klasy"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}, nil
}

// loadOrMakeCA loads f's CA, or makes one when neither its certificate
// nor its key exists.
func loadOrMakeCA(f *File) (*x509.Certificate, crypto.Signer, bool, error) {
	haveCert, haveKey := exists(f.CA.Cert), exists(f.CA.Key)
	if haveCert && haveKey {
		cert, err := readCert(f.CA.Cert)
		if err != nil {
			return nil, nil, false, err
		}
		key, err := readKey(f.CA.Key)
		if err != nil {
			return nil, nil, false, err
		}
		return cert, key, false, nil
	}
	if haveCert || haveKey {
		return nil, nil, false, fmt.Errorf("%s exists but %s does not: the CA needs both", first(haveCert, f.CA.Cert, f.CA.Key), first(haveCert, f.CA.Key, f.CA.Cert))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, err
	}
	tmpl, err := template("klasy domains CA of " + f.Path)
	if err != nil {
		return nil, nil, false, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, false, fmt.Errorf("making the CA: %w", err)
	}
	if err := writeKeyPair(f.CA, der, key); err != nil {
		return nil, nil, false, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, true, err
}

func writeKeyPair(kp KeyPair, der []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	for _, p := range []string{kp.Cert, kp.Key} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
	}
	// The key first and exclusively: an existing file is never
	// overwritten.
	if err := writeNew(kp.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	if err := writeNew(kp.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		os.Remove(kp.Key)
		return err
	}
	return nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func readKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, fmt.Errorf("%s holds no PEM key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New(path + ": not a signing key")
	}
	return s, nil
}
